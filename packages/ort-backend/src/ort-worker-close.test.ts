import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel } from '@flexhelm/engine';

const dir = mkdtempSync(join(tmpdir(), 'flexhelm-ort-close-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const engineDist = fileURLToPath(new URL('../../engine/dist/index.js', import.meta.url));
const ortDist = fileURLToPath(new URL('../dist/index.js', import.meta.url));

describe('closing an onnxruntime engine while a batch runs', () => {
  it('waits for the session run in flight instead of tearing the worker down under it (which aborted the process)', () => {
    makeModel({ config: { name: 'close-mid-run', hiddenSize: 256, numHiddenLayers: 4, numAttentionHeads: 4, ffnDim: 1024, vocabSize: 2000, maxPositionEmbeddings: 512 }, outDir: join(dir, 'm'), seed: 1 });
    // A child process: several batches of long prompts, and close() while they run; then a normal exit.
    const script = join(dir, 'close-mid-run.mjs');
    writeFileSync(
      script,
      `import { Engine, generate } from ${JSON.stringify(engineDist)};
import { OrtBackend } from ${JSON.stringify(ortDist)};
const engine = await Engine.load(${JSON.stringify(join(dir, 'm'))}, { backend: new OrtBackend() });
const prompt = Array.from({ length: 400 }, (_, j) => 4 + (j % 1990));
const running = generate(engine, Array.from({ length: 8 }, () => ({ prompt, maxTokens: 8 }))).catch(() => 'stopped');
setTimeout(() => void engine.close().then(() => console.log('closed')), 30);
console.log(await running);
`,
    );
    for (let attempt = 0; attempt < 3; attempt++) {
      const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 120_000 });
      expect(child.stderr, 'the process aborted').not.toMatch(/terminate called/);
      expect(child.signal).toBeNull();
      expect(child.status).toBe(0);
      expect(child.stdout).toMatch(/closed/);
    }
  });

  it('lets a worker that is still loading onnxruntime finish starting before it stops it (a first disk write that failed at once aborted the process)', () => {
    const clientDist = fileURLToPath(new URL('../dist/ort-worker-client.js', import.meta.url));
    const script = join(dir, 'close-while-starting.mjs');
    // Stopped at once and after short random waits: the windows in which the thread is still inside the binding's load.
    writeFileSync(
      script,
      `import { OrtWorkerClient } from ${JSON.stringify(clientDist)};
for (let i = 0; i < 30; i++) {
  const client = new OrtWorkerClient(1);
  if (i % 3) await new Promise((r) => setTimeout(r, (i * 7) % 60));
  await client.terminate();
}
console.log('stopped 30');
`,
    );
    const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 120_000 });
    expect(child.stderr, 'the process aborted').not.toMatch(/terminate called/);
    expect(child.signal).toBeNull();
    expect(child.status).toBe(0);
    expect(child.stdout).toMatch(/stopped 30/);
  });
});
