#!/usr/bin/env node
// `node tooling/scripts/pack-public.mjs DIR @flexhelm/run-spec [@flexhelm/metrics …] [--third-party]`: writes into DIR
// the `pnpm pack` tarballs of the named public packages and of every @flexhelm package they depend on, and prints their
// paths, one a line: what `npm i DIR/*.tgz` installs outside the workspace (the packages are not on the npm registry
// yet, and a lone tarball's `@flexhelm/core@0.0.0` dependency is looked up there). `--third-party` also writes
// tarballs of their other dependencies as installed in this clone, so the install needs no network.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const thirdParty = args.includes('--third-party');
const [dest, ...names] = args.filter((a) => a !== '--third-party');
if (!dest || names.length === 0) {
  console.error('usage: pack-public.mjs DIR @flexhelm/<package>… [--third-party]');
  process.exit(2);
}

/** Workspace packages by name → folder. */
const workspace = new Map();
for (const group of ['packages', 'apps']) {
  for (const entry of readdirSync(join(root, group))) {
    const file = join(root, group, entry, 'package.json');
    if (existsSync(file)) workspace.set(JSON.parse(readFileSync(file, 'utf8')).name, join(root, group, entry));
  }
}

function fail(message) {
  console.error(`pack-public: ${message}`);
  process.exit(2);
}

const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));

/** Node's lookup of `name` from `dir`: the nearest node_modules/name above it (pnpm's layout resolves this way too). */
function installedDir(name, dir) {
  for (let d = dir; ; d = dirname(d)) {
    const candidate = join(d, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(d) === d) fail(`${name} is not installed below ${dir}: run the Quick start's install first`);
  }
}

const ours = new Set();
const theirs = new Map(); // realpath → name@version
function visit(name) {
  if (ours.has(name)) return;
  const dir = workspace.get(name);
  if (!dir) fail(`${name} is not a package of this workspace (known: ${[...workspace.keys()].join(', ')})`);
  const pkg = readJson(join(dir, 'package.json'));
  if (pkg.private) fail(`${name} is private: only public packages are packed`);
  if (!existsSync(join(dir, 'dist'))) fail(`${name} is not built: run \`pnpm build\` first`);
  ours.add(name);
  for (const dep of Object.keys(pkg.dependencies ?? {})) {
    if (workspace.has(dep)) visit(dep);
    else visitThirdParty(dep, dir);
  }
}
function visitThirdParty(name, from) {
  const dir = installedDir(name, from);
  if (theirs.has(dir)) return;
  const pkg = readJson(join(dir, 'package.json'));
  theirs.set(dir, `${pkg.name}@${pkg.version}`);
  for (const dep of Object.keys(pkg.dependencies ?? {})) visitThirdParty(dep, dir);
}
for (const name of names) visit(name);

mkdirSync(dest, { recursive: true });
const out = resolve(dest);
// pnpm pack rewrites `workspace:*` to the version; npm pack would keep it and make the tarball uninstallable.
const pnpmVersion = readJson(join(root, 'package.json')).packageManager.replace(/^pnpm@/, '');
// biome-ignore lint/suspicious/noUndeclaredEnvVars: only picks which pnpm binary packs; it does not change the tarballs.
const execpath = process.env.npm_execpath ?? '';
// The pnpm that runs this script: a JavaScript entry runs under this Node, pnpm's native build (an ELF file) runs as itself.
const isScript = (file) => {
  try {
    return readFileSync(file).subarray(0, 4).toString('latin1') !== '\x7fELF';
  } catch {
    return false;
  }
};
const pnpm = !/pnpm/.test(execpath) ? ['npx', '-y', `pnpm@${pnpmVersion}`] : isScript(execpath) ? [process.execPath, execpath] : [execpath];
const written = [];
for (const name of ours) {
  const stdout = execFileSync(pnpm[0], [...pnpm.slice(1), 'pack', '--pack-destination', out], { cwd: workspace.get(name), encoding: 'utf8' });
  written.push(stdout.trim().split('\n').at(-1));
}
if (thirdParty) {
  for (const [dir, id] of theirs) {
    // npm pack would run the package's lifecycle scripts; a plain tar of the installed folder is the same tarball shape.
    // pnpm's store hard-links identical files: npm skips tar hard-link entries, so store each file's content.
    const file = join(out, `${id.replace(/^@/, '').replace(/[/@]/g, '-')}.tgz`);
    execFileSync('tar', ['-czf', file, '--hard-dereference', '--transform', 's,^\\.,package,', '--exclude', './node_modules', '.'], { cwd: dir });
    written.push(file);
  }
}
console.log(written.join('\n'));
