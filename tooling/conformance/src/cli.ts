#!/usr/bin/env node
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runConformance } from './run-conformance.js';

const usage = 'usage: pnpm conformance [--dir DIR] [--verbose]   (DIR defaults to ../shared/conformance)';

async function main(argv: string[]): Promise<number> {
  let dir = resolve(fileURLToPath(new URL('../../../../shared/conformance', import.meta.url)));
  let verbose = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--dir') {
      const value = argv[++i];
      if (!value) {
        console.error(`--dir needs a folder\n${usage}`);
        return 2;
      }
      dir = resolve(value);
    } else if (a === '--verbose' || a === '-v') verbose = true;
    else if (a === '--help' || a === '-h') {
      console.log(usage);
      return 0;
    } else {
      console.error(`unknown argument ${JSON.stringify(a)}\n${usage}`);
      return 2;
    }
  }
  if (!existsSync(dir)) {
    console.error(`conformance folder ${dir} does not exist; pass --dir DIR (a folder with helm/ and opt/ subfolders)`);
    return 2;
  }
  // HELM's own word lists (not shipped): a HELM v0.2.1 source tree beside the conformance folder is used when present.
  const helmSource = resolve(dir, '..', 'helm-v0.2.1');
  if (process.env.FLEXHELM_HELM_SOURCE_DIR === undefined && existsSync(helmSource)) process.env.FLEXHELM_HELM_SOURCE_DIR = helmSource;
  const reports = await runConformance(dir);
  let passed = 0;
  let failed = 0;
  let notRun = 0;
  for (const r of reports) {
    passed += r.passed;
    failed += r.failed;
    notRun += r.notRun;
    console.log(r.status === 'skipped' ? `${r.file}: skipped (not supported yet)` : `${r.file}: ${r.passed} passed, ${r.failed} failed`);
    for (const note of r.notes ?? []) console.log(`  ${note}`);
    if (r.notRun > 0) console.log(`  ${r.notRun} cases not run: ${r.notRunReasons.join('; ')}`);
    const shown = verbose ? r.failures : r.failures.slice(0, 10);
    for (const f of shown) console.log(`  FAIL ${f}`);
    if (shown.length < r.failures.length) console.log(`  … ${r.failures.length - shown.length} more (--verbose shows all)`);
  }
  if (notRun > 0) console.log(`${notRun} cases not run on this machine (see above: they need data that is not here)`);
  console.log(`${passed} passed, ${failed} failed`);
  return failed > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
