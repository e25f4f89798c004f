// Where a benchmark ran: CPU, the ISA flags that decide the fast paths, the ISA oneDNN chose, cores, load and versions.
// Every `pnpm bench:*` puts `benchHost()` at the start of its JSON report and `finishHost()` at the end, and each
// RESULTS row names `hostType()`: figures from an AMD EPYC without AMX and an Intel Xeon with AMX are not comparable.
// Plain Node only (no workspace imports): the oneDNN query runs in a child process, so a bench that does not use oneDNN
// does not load its addon (nor its OpenMP settings) into its own process.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** The CPU flags that pick a code path here (oneDNN's brgemm ISA, onnxruntime's MLAS kernels). */
export const FLAGS_OF_INTEREST = ['avx2', 'avx512f', 'avx512_bf16', 'avx512_fp16', 'amx_bf16', 'amx_int8', 'amx_tile'];

/** `/proc/cpuinfo`'s first processor block as fields (empty off Linux or when unreadable). */
export function cpuInfoFields(text) {
  const fields = {};
  for (const line of text.split('\n')) {
    if (line.trim() === '') break;
    const at = line.indexOf(':');
    if (at > 0) fields[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return fields;
}

/**
 * "AMD EPYC family 25 model 17 · AVX-512 bf16 · no AMX": the kind of host a RESULTS table is about. Virtual machines
 * often show a bare "AMD EPYC" as the model name, while two generations under that name (family 25, Zen 4, and
 * family 26, Zen 5, both seen here) give different figures for the same code: the family and model say which.
 */
export function hostType(host) {
  const f = host.cpu_flags;
  const isa = f.amx_bf16 ? 'AMX' : f.avx512_bf16 ? 'AVX-512 bf16' : f.avx512f ? 'AVX-512' : f.avx2 ? 'AVX2' : 'no AVX2';
  const [family, model] = (host.cpu_family_model ?? '').split('/');
  const generation = family && model ? ` family ${family} model ${model}` : '';
  return `${host.cpu_model}${generation} · ${isa}${f.amx_bf16 ? '' : ' · no AMX'}`;
}

/** The version of a package as installed for a workspace package (`from`: its folder under the repository). */
function installedVersion(name, from) {
  const file = `${root}${from}/node_modules/${name}/package.json`;
  try {
    return JSON.parse(readFileSync(file, 'utf8')).version;
  } catch {
    return null;
  }
}

/** What oneDNN dispatches to, from the built addon in a child process; `{ available: false, reason }` without it. */
function oneDnnFeatures() {
  const dist = `${root}packages/onednn-backend/dist/index.js`;
  if (!existsSync(dist)) return { available: false, reason: '@flexhelm/onednn-backend is not built' };
  const script = `const m = await import(${JSON.stringify(dist)}); const s = m.oneDnnStatus(); process.stdout.write(JSON.stringify(s.available ? { available: true, ...s.features } : { available: false, reason: s.reason }));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) return { available: false, reason: `query failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n')[0]}` };
  try {
    return JSON.parse(r.stdout);
  } catch {
    return { available: false, reason: `query printed no JSON: ${r.stdout.slice(0, 200)}` };
  }
}

const round1 = (xs) => xs.map((x) => +x.toFixed(2));

/** The host block of a bench report; call it before the first measurement. */
export function benchHost() {
  let info = {};
  try {
    info = cpuInfoFields(readFileSync('/proc/cpuinfo', 'utf8'));
  } catch {
    // Not Linux: the model from os.cpus(), no flags.
  }
  const flags = new Set((info.flags ?? '').split(/\s+/));
  const host = {
    date: new Date().toISOString(),
    cpu_model: info['model name'] ?? cpus()[0]?.model ?? 'unknown',
    cpu_vendor: info.vendor_id ?? 'unknown',
    cpu_family_model: info['cpu family'] ? `${info['cpu family']}/${info.model}` : null,
    cpu_flags: Object.fromEntries(FLAGS_OF_INTEREST.map((f) => [f, flags.has(f)])),
    cores: cpus().length,
    onednn: oneDnnFeatures(),
    node: process.version,
    onnxruntime: installedVersion('onnxruntime-node', 'packages/engine'),
    transformers_js: installedVersion('@huggingface/transformers', 'packages/engine'),
    load_average_before: round1(loadavg()),
  };
  host.host_type = hostType(host);
  return host;
}

/** The host block with the load average after the runs and the end time. */
export function finishHost(host) {
  return { ...host, load_average_after: round1(loadavg()), finished: new Date().toISOString() };
}

/** One line for a log or a RESULTS note: host type, oneDNN's ISA, cores, load before/after. */
export function hostLine(host) {
  const isa = host.onednn.available ? `oneDNN ${host.onednn.version} ${host.onednn.bf16Impl}` : 'no oneDNN';
  const after = host.load_average_after ? ` → ${host.load_average_after[0]}` : '';
  return `${host.host_type}, ${isa}, ${host.cores} cores, load ${host.load_average_before[0]}${after}, ${host.date}`;
}
