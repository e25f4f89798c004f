#!/usr/bin/env node
// Builds the oneDNN addon with node-gyp, offline, and never fails the install: without libdnnl-dev, a C++ compiler,
// python3 or the Node headers it prints one line and exits 0; the package then reports `available: false` and the
// engine keeps its onnxruntime backend.
//  - Node headers come from the running Node's install prefix (`--nodedir`): pnpm does not pass npm's `nodedir` to
//    scripts, and node-gyp would otherwise try to download them.
//  - An addon built from the same sources and Node ABI is kept; `--force` rebuilds anyway.
//  - FLEXHELM_NATIVE_BUILD=0 skips the build; FLEXHELM_NATIVE_VERBOSE=1 shows the compiler output.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const addon = join(packageDir, 'build', 'Release', 'onednn_backend.node');
const stampFile = join(packageDir, 'build', 'Release', 'build-stamp.txt');
const say = (message) => console.log(`@flexhelm/onednn-backend: ${message}`);
const works = (command, args) => spawnSync(command, args, { stdio: 'ignore' }).status === 0;

const headerDirs = ['/usr/include', '/usr/local/include'];
const hasDnnlHeaders = () => headerDirs.some((d) => existsSync(join(d, 'dnnl.hpp')) || existsSync(join(d, 'oneapi', 'dnnl', 'dnnl.hpp')));

function sourceStamp() {
  const hash = createHash('sha256').update(`${process.versions.modules} ${process.arch} ${process.env.CXX ?? ''}\n`);
  // Every file under native/ (kernels are grouped in folders by kind), by its path.
  const files = readdirSync(join(packageDir, 'native'), { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name)).sort();
  for (const file of files) hash.update(file.slice(packageDir.length)).update(readFileSync(file));
  return hash.update(readFileSync(join(packageDir, 'binding.gyp'))).digest('hex');
}

function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** Concurrent installs must not run node-gyp in the same build/ folder; a lock directory holds the owner's pid. */
function withLock(body) {
  const lock = join(packageDir, '.native-build.lock');
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      let owner = NaN;
      try {
        owner = Number(readFileSync(join(lock, 'pid'), 'utf8'));
      } catch {}
      let alive = false;
      try {
        process.kill(owner, 0);
        alive = true;
      } catch (e) {
        alive = e.code === 'EPERM';
      }
      if (Number.isInteger(owner) && owner > 0 && !alive) rmSync(lock, { recursive: true, force: true });
      else if (Date.now() > deadline) return say(`another build holds ${lock}; remove it if stale`);
      else sleep(200);
    }
  }
  try {
    return body();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function main() {
  if (process.env.FLEXHELM_NATIVE_BUILD === '0') return say('native build skipped (FLEXHELM_NATIVE_BUILD=0); the oneDNN backend is unavailable');
  const nodeDir = resolve(dirname(process.execPath), '..');
  if (!existsSync(join(nodeDir, 'include', 'node', 'node_api.h'))) return say(`no Node headers under ${nodeDir}/include/node; the oneDNN backend is unavailable`);
  if (!hasDnnlHeaders()) return say('oneDNN headers not found (apt-get install libdnnl-dev); the oneDNN backend is unavailable, onnxruntime will be used');
  const compiler = process.env.CXX ?? 'c++';
  if (!works(compiler, ['--version'])) return say(`no C++ compiler (${compiler}); install g++ for the oneDNN backend`);
  if (!works(process.env.PYTHON ?? 'python3', ['--version'])) return say('no python3 (node-gyp needs it); the oneDNN backend is unavailable');
  let nodeGyp;
  try {
    nodeGyp = createRequire(join(packageDir, 'package.json')).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    return say('node-gyp is not installed; the oneDNN backend is unavailable');
  }
  const force = process.argv.includes('--force');
  const stamp = sourceStamp();
  const upToDate = () => existsSync(addon) && existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp;
  if (!force && upToDate()) return say('native addon is up to date');
  return withLock(() => {
    if (!force && upToDate()) return say('native addon is up to date');
    const result = spawnSync(process.execPath, [nodeGyp, 'rebuild', `--nodedir=${nodeDir}`, '--jobs=max'], {
      cwd: packageDir,
      encoding: 'utf8',
      stdio: process.env.FLEXHELM_NATIVE_VERBOSE === '1' ? 'inherit' : 'pipe',
      // The compiler's output can pass spawnSync's 1 MiB default, which kills the build (status null) mid-compile.
      maxBuffer: 256 * 1024 * 1024,
    });
    if (result.status !== 0) {
      rmSync(addon, { force: true });
      const output = `${result.stdout ?? ''}\n${result.stderr ?? ''}`;
      const first = output.split('\n').find((line) => /error/i.test(line))?.trim() ?? (result.error ? result.error.message : result.status === null ? `killed by ${result.signal}` : `exit status ${result.status}`);
      return say(`native build failed (${first.slice(0, 200)}); the oneDNN backend is unavailable. Rerun with FLEXHELM_NATIVE_VERBOSE=1 for details`);
    }
    const tmp = `${stampFile}.tmp-${process.pid}`;
    writeFileSync(tmp, stamp);
    renameSync(tmp, stampFile);
    say('native addon built');
  });
}

try {
  main();
} catch (error) {
  say(`native build skipped (${error instanceof Error ? error.message : String(error)}); the oneDNN backend is unavailable`);
}
process.exit(0);
