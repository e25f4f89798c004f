import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeModel, SafetensorsSource, writeSafetensors } from '@flexhelm/engine';

// The built binary, as a user runs it.
const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'flexhelm-cli-garbage-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const tiny = { name: 'tiny', hiddenSize: 16, numHiddenLayers: 1, numAttentionHeads: 2, vocabSize: 50, maxPositionEmbeddings: 64 };

function modelFolder(name: string, spoil: (dir: string) => void): string {
  const dir = join(root, name);
  makeModel({ config: tiny, outDir: dir, seed: 1 });
  spoil(dir);
  return dir;
}

/** `flexhelm run` on a local model folder with a fixed all-resident policy: it fails at the config or the weights. */
function run(folder: string) {
  const args = ['run', '-d', 'synthetic_reasoning:mode=induction', '-m', '1', '--model', 'local/garbage', '--path', folder, '--data-dir', join(root, 'data'), '--output-path', join(root, 'out'), '--percent', '100', '0', '100', '0', '100', '0', '--gpu-batch-size', '1', '--compute-dtype', 'fp32'];
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 120_000 });
  const errors = r.stderr.split('\n').filter((line) => line.startsWith('flexhelm run:'));
  return { status: r.status, stderr: r.stderr, errors };
}

describe('flexhelm run on a malformed model folder', () => {
  it('exits 2 with one line naming the file and what is wrong, never an internal error', () => {
    const cases: [string, (dir: string) => void, RegExp][] = [
      [
        'shifted',
        (dir) => {
          const bytes = readFileSync(join(dir, 'model.safetensors'));
          bytes.writeBigUInt64LE(bytes.readBigUInt64LE(0) - 1n, 0);
          writeFileSync(join(dir, 'model.safetensors'), bytes);
        },
        /^flexhelm run: .*shifted\/model\.safetensors: the last 1 bytes of the data section belong to no tensor/,
      ],
      [
        'nan',
        (dir) => {
          const file = join(dir, 'model.safetensors');
          const src = new SafetensorsSource(file);
          const tensors = [...src.tensors.values()].map((info) => ({ name: info.name, shape: info.shape, dtype: 'F32' as const, data: src.read(info.name) }));
          src.close();
          tensors.find((t) => t.name === 'model.decoder.layers.0.fc2.weight')!.data[10] = NaN;
          writeSafetensors(file, tensors);
        },
        /^flexhelm run: .*nan\/model\.safetensors: tensor model\.decoder\.layers\.0\.fc2\.weight holds NaN at flat index 10/,
      ],
      [
        'layers',
        (dir) => {
          const config = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8'));
          writeFileSync(join(dir, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: 1e9 }));
        },
        /^flexhelm run: .*layers\/config\.json: num_hidden_layers is 1000000000; it must be an integer from 1 to 1024/,
      ],
      [
        'index',
        (dir) => writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { 'model.decoder.embed_tokens.weight': 3 } })),
        /^flexhelm run: .*index\/model\.safetensors\.index\.json: weight_map\["model\.decoder\.embed_tokens\.weight"\] is 3/,
      ],
    ];
    for (const [name, spoil, message] of cases) {
      const r = run(modelFolder(name, spoil));
      expect(r.stderr, name).not.toMatch(/internal error|\n\s+at /);
      expect(r.errors, name).toHaveLength(1);
      expect(r.errors[0], name).toMatch(message);
      expect(r.status, name).toBe(2);
    }
  }, 300_000);
});
