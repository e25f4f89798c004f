import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FencedBlock, fencedBlocks, repoRoot } from './readme-blocks.js';

/**
 * Every fenced `sh` block of the root README and of each package and app README, run as written in a scratch folder
 * on loopback, in file order (a later block may use what an earlier one made), with these substitutions only:
 * - the Quick start's install-and-build prefix is dropped (CI has just done it); the rest of that line runs;
 * - Hugging Face Hub ids given to `--model` come from a loopback mirror (`HF_ENDPOINT`) holding a tiny random model of
 *   the family the id names;
 * - ports 8000, 8001 and 6379 become free loopback ports;
 * - `npm i openai` links this clone's installed copy (no registry);
 * - npm's global prefix is a scratch folder on PATH, so `npm link` puts `flexhelm` there;
 * - HELM's schema.yaml comes from a HELM v0.2.1 checkout (`FLEXHELM_HELM_SOURCE_DIR`) when one is beside the clone.
 * A block that cannot run here says so in its info string: `sh no-run: <the reason>`.
 */
const READMES = ['README.md', ...['packages', 'apps'].flatMap((g) => readdirSync(join(repoRoot, g)).map((d) => `${g}/${d}/README.md`))].filter((f) => existsSync(join(repoRoot, f)));
const QUICK_START_PREFIX = 'npx -y pnpm@12.4.2 install --frozen-lockfile && npx -y pnpm@12.4.2 build && ';

interface ShellBlock extends FencedBlock {
  file: string;
}

const blocks: ShellBlock[] = READMES.flatMap((file) => fencedBlocks(readFileSync(join(repoRoot, file), 'utf8'), file).map((b) => ({ ...b, file }))).filter((b) => /^(sh|bash|shell|console)\b/.test(b.info));
const runnable = blocks.filter((b) => b.info === 'sh');

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/** `make-model`'s inline config for a tiny model of the family a Hub id names. */
function tinyConfigFor(id: string): string {
  const small = { hidden_size: 64, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1024 };
  if (/opt/i.test(id)) return JSON.stringify({ base: 'opt-125m', hiddenSize: 32, numHiddenLayers: 2, numAttentionHeads: 2, ffnDim: 64 });
  if (/mistral/i.test(id)) return JSON.stringify({ base: 'mistral-7b-v0.1', ...small });
  if (/qwen/i.test(id)) return JSON.stringify({ base: 'qwen2-0.5b', ...small, chat: /instruct|chat/i.test(id) });
  if (/llama/i.test(id)) return JSON.stringify({ base: 'llama-3.2-1b', ...small, chat: /instruct|chat/i.test(id) });
  throw new Error(`a README names the Hub model ${id}, of no family the README test knows (opt, llama, mistral, qwen)`);
}

describe('README shell blocks', () => {
  it('marks every block it does not run with `sh no-run: <reason>`', () => {
    for (const b of blocks.filter((x) => x.info !== 'sh')) {
      expect(b.info, `${b.file}:${b.line}`).toMatch(/^sh no-run: \S.{9,}/);
    }
  });

  it('finds the root README’s examples and the Quick start’s install prefix', () => {
    const root = runnable.filter((b) => b.file === 'README.md');
    expect(root.length).toBeGreaterThanOrEqual(7);
    expect(root[0]!.code.startsWith(QUICK_START_PREFIX)).toBe(true);
  });
});

describe('README shell blocks, run as written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'flexhelm-readme-'));
  const work = join(dir, 'work');
  const models = join(dir, 'hub');
  const cli = join(repoRoot, 'apps/cli/dist/main.js');
  let mirror: Server;
  let env: NodeJS.ProcessEnv;
  const ports = new Map<string, number>();
  // Servers a block starts in the background stay up for the blocks after it, as in the reader's shell; each block
  // runs in a process group of its own, ended when the file's blocks are done.
  const groups: number[] = [];
  const endGroup = (pgid: number) => {
    try {
      process.kill(-pgid, 'SIGTERM');
    } catch {
      // the group has already ended
    }
  };

  beforeAll(async () => {
    for (const d of [work, models, join(dir, 'home'), join(dir, 'npm-global', 'bin'), join(dir, 'data')]) mkdirSync(d, { recursive: true });
    // The scratch folder is a clone's root as far as the README's relative paths go.
    for (const d of ['apps', 'packages']) symlinkSync(join(repoRoot, d), join(work, d));
    const ids = new Set(runnable.flatMap((b) => [...b.code.matchAll(/--model ([A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+)/g)].map((m) => m[1]!)).filter((id) => !id.startsWith('.')));
    for (const id of ids) execFileSync(process.execPath, [cli, 'make-model', '--config', tinyConfigFor(id), '--out', join(models, id), '--dtype', 'f32'], { stdio: 'pipe' });
    mirror = createServer((req, res) => {
      const m = /^\/([^/]+\/[^/]+)\/resolve\/main\/([^/?]+)/.exec(req.url ?? '');
      const file = m && ids.has(m[1]!) ? join(models, m[1]!, m[2]!) : undefined;
      if (!file || !existsSync(file)) {
        res.writeHead(404).end('not found');
        return;
      }
      const body = readFileSync(file);
      res.writeHead(200, { 'content-length': body.length }).end(body);
    });
    await new Promise<void>((r) => mirror.listen(0, '127.0.0.1', r));
    for (const p of ['8000', '8001', '6379']) ports.set(p, await freePort());
    const helmSource = join(repoRoot, '../shared/helm-v0.2.1');
    env = {
      ...process.env,
      HOME: join(dir, 'home'),
      PATH: `${join(dir, 'npm-global', 'bin')}:${process.env.PATH}`,
      FLEXHELM_DATA_DIR: join(dir, 'data'),
      HF_ENDPOINT: `http://127.0.0.1:${(mirror.address() as AddressInfo).port}`,
      npm_config_prefix: join(dir, 'npm-global'),
      npm_config_cache: join(dir, 'npm-cache'),
      npm_config_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      ...(existsSync(join(helmSource, 'src/helm/benchmark/static/schema.yaml')) ? { FLEXHELM_HELM_SOURCE_DIR: helmSource } : {}),
    };
  }, 300_000);

  afterAll(async () => {
    for (const g of groups) endGroup(g);
    await new Promise((r) => mirror?.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  /** The block's text with the documented substitutions. */
  function substituted(b: ShellBlock): string {
    let code = b.code;
    if (code.startsWith(QUICK_START_PREFIX)) code = code.slice(QUICK_START_PREFIX.length);
    for (const [from, to] of ports) code = code.replace(new RegExp(`(:|--port |-p )${from}\\b`, 'g'), `$1${to}`);
    const openai = realpathSync(join(repoRoot, 'apps/server/node_modules/openai'));
    code = code.replace(/^npm i(nstall)? openai$/m, `mkdir -p node_modules && ln -sfn ${openai} node_modules/openai`);
    return code;
  }

  for (const b of runnable) {
    it(`${b.file}:${b.line} runs`, async () => {
      const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', substituted(b)], { cwd: work, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      let output = '';
      child.stdout.on('data', (d) => { output += d; });
      child.stderr.on('data', (d) => { output += d; });
      const status = await new Promise<number | null>((resolve) => {
        const timer = setTimeout(() => { output += '\n[README test: timed out after 240 s]'; resolve(null); }, 240_000);
        child.on('exit', (code) => { clearTimeout(timer); resolve(code); });
      });
      groups.push(child.pid!);
      if (status === null) endGroup(child.pid!);
      expect(status, `${b.file}:${b.line} failed:\n${output.slice(-4000)}`).toBe(0);
    }, 300_000);
  }
});
