#!/usr/bin/env node
// Builds the native addon with node-gyp, offline. Never fails: without a compiler, Python or Node headers it prints
// one line and exits 0, and the package uses its pure-JS fallback.
//  - Headers come from the running Node's own install prefix (`--nodedir`), because pnpm does not forward npm's
//    `nodedir` setting to scripts and node-gyp would otherwise try to download them.
//  - An addon built from the same sources, Node ABI and liburing availability is kept (every workspace install runs
//    this script); `--force` rebuilds anyway.
//  - FLEXHELM_NATIVE_BUILD=0 skips the build; FLEXHELM_NATIVE_VERBOSE=1 shows the compiler output.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const verbose = process.env.FLEXHELM_NATIVE_VERBOSE === '1';
const say = (message) => console.log(`@flexhelm/pinned-memory: ${message}`);

function commandWorks(command, args) {
  const result = spawnSync(command, args, { stdio: 'ignore' });
  return result.status === 0;
}

function findNodeDir() {
  const prefix = resolve(dirname(process.execPath), '..');
  if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) return prefix;
  // node-gyp's own header cache counts too (filled by an earlier online `node-gyp install`).
  const cached = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'node-gyp', process.versions.node);
  if (existsSync(join(cached, 'include', 'node', 'node_api.h'))) return cached;
  return undefined;
}

// Concurrent installs (several workspace installs at once) would run node-gyp in the same build/ folder and clobber
// each other, so builds take turns through a lock directory holding the owner's pid.
function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function processAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

function acquireLock(lockDir) {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      mkdirSync(lockDir);
      writeFileSync(join(lockDir, 'pid'), String(process.pid));
      return true;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
      let owner = NaN;
      try {
        owner = Number(readFileSync(join(lockDir, 'pid'), 'utf8'));
      } catch {
        // the owner has not written its pid yet
      }
      if (Number.isInteger(owner) && owner > 0 && !processAlive(owner)) rmSync(lockDir, { recursive: true, force: true });
      else if (Date.now() > deadline) return false;
      else sleep(200);
    }
  }
}

const addon = join(packageDir, 'build', 'Release', 'pinned_memory.node');
const stampFile = join(packageDir, 'build', 'Release', 'build-stamp.txt');

/** Identifies what the addon was built from; a rebuild is needed when it changes. */
function buildStamp() {
  const hash = createHash('sha256');
  hash.update(`${process.versions.modules} ${process.arch} ${existsSync('/usr/include/liburing.h')} ${process.env.CXX ?? ''}\n`);
  for (const name of readdirSync(join(packageDir, 'native')).sort()) hash.update(name).update(readFileSync(join(packageDir, 'native', name)));
  hash.update(readFileSync(join(packageDir, 'binding.gyp')));
  return hash.digest('hex');
}

function upToDate(stamp) {
  try {
    return existsSync(addon) && readFileSync(stampFile, 'utf8') === stamp;
  } catch {
    return false;
  }
}

function main() {
  if (process.env.FLEXHELM_NATIVE_BUILD === '0') return say('native build skipped (FLEXHELM_NATIVE_BUILD=0); using the pure-JS fallback');
  const nodeDir = findNodeDir();
  if (!nodeDir) return say(`no Node headers next to ${process.execPath} (include/node/node_api.h); using the pure-JS fallback`);
  const compiler = process.env.CXX ?? 'c++';
  if (!commandWorks(compiler, ['--version'])) return say(`no C++ compiler (${compiler}); install g++ to build the native addon. Using the pure-JS fallback`);
  if (!commandWorks(process.env.PYTHON ?? 'python3', ['--version'])) return say('no python3 (node-gyp needs it); using the pure-JS fallback');
  let nodeGyp;
  try {
    nodeGyp = createRequire(join(packageDir, 'package.json')).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    return say('node-gyp is not installed; using the pure-JS fallback');
  }
  const force = process.argv.includes('--force');
  const stamp = buildStamp();
  if (!force && upToDate(stamp)) return say('native addon is up to date');
  const lockDir = join(packageDir, '.native-build.lock');
  if (!acquireLock(lockDir)) return say(`another native build holds ${lockDir} for over 10 minutes; remove it if stale. Using the pure-JS fallback`);
  let result;
  try {
    // The build we waited for may have produced exactly this addon.
    if (!force && upToDate(stamp)) return say('native addon is up to date');
    const args = [nodeGyp, 'rebuild', `--nodedir=${nodeDir}`, '--jobs=max'];
    result = spawnSync(process.execPath, args, { cwd: packageDir, encoding: 'utf8', stdio: verbose ? 'inherit' : 'pipe' });
  } finally {
    rmSync(lockDir, { recursive: true, force: true });
  }
  if (result.status !== 0) {
    // A half-built addon must not be picked up by the loader.
    rmSync(addon, { force: true });
    const output = `${result.stdout ?? ''}\n${result.stderr ?? ''}`;
    const firstError = output.split('\n').find((line) => /error/i.test(line))?.trim() ?? `exit status ${result.status}`;
    return say(`native build failed (${firstError.slice(0, 200)}); using the pure-JS fallback. Rerun with FLEXHELM_NATIVE_VERBOSE=1 for details`);
  }
  writeFileSync(stampFile, stamp);
  // 'auto' reads with pread threads either way; liburing only adds the engine callers may ask for by name.
  const uring = existsSync('/usr/include/liburing.h') ? ', io_uring on request' : '';
  say(`native addon built (pread file reads${uring})`);
}

try {
  main();
} catch (error) {
  say(`native build skipped (${error instanceof Error ? error.message : String(error)}); using the pure-JS fallback`);
}
process.exit(0);
