import type { Checker } from './check-result.js';

/**
 * Golden files the runner knows, by path relative to the conformance folder. Each maps to a checker module in
 * `./checks/`; a file whose checker is not written yet is reported as skipped (never as passed).
 */
const KNOWN_FILES: { pattern: RegExp; module: string }[] = [
  { pattern: /^helm\/runspecs\.json$/, module: './checks/runspecs.js' },
  { pattern: /^helm\/synthetic\.json$/, module: './checks/synthetic.js' },
  { pattern: /^helm\/adapters\.json$/, module: './checks/adapters.js' },
  { pattern: /^helm\/perturbations\.json$/, module: './checks/perturbations.js' },
  { pattern: /^helm\/metrics\.json$/, module: './checks/metrics.js' },
  { pattern: /^opt\/[^/]+\/golden\.json$/, module: './checks/opt-golden.js' },
  { pattern: /^llama\/[^/]+\/golden\.json$/, module: './checks/llama-golden.js' },
  { pattern: /^families\/[^/]+\/golden\.json$/, module: './checks/families-golden.js' },
];

/** The checker for a golden file, `null` if the file is not one the runner knows, `'skipped'` if not implemented. */
export async function checkerFor(relPath: string): Promise<Checker | 'skipped' | null> {
  const known = KNOWN_FILES.find((k) => k.pattern.test(relPath));
  if (!known) return null;
  try {
    const mod = (await import(known.module)) as { check?: Checker };
    return mod.check ?? 'skipped';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_MODULE_NOT_FOUND' && String((err as Error).message).includes(known.module.slice(2).replace('.js', ''))) {
      return 'skipped';
    }
    throw err;
  }
}
