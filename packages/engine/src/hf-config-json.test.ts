import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hfConfigJson } from './hf-config-json.js';

const conformance = join(import.meta.dirname, '..', '..', '..', '..', 'shared', 'conformance');
// Every folder of the golden models holding transformers-written configs (OPT's by 4.33.3, the Llama family's by 4.47.1).
const goldenFolders = ['opt', 'llama'].flatMap((family) =>
  readdirSync(join(conformance, family), { withFileTypes: true })
    .filter((m) => m.isDirectory())
    .flatMap((m) => readdirSync(join(conformance, family, m.name), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => join(conformance, family, m.name, d.name))),
);

describe('hfConfigJson', () => {
  it('finds the golden folders', () => {
    expect(goldenFolders.length).toBe(14);
  });

  it.each(goldenFolders.flatMap((dir) => ['config.json', 'generation_config.json'].map((file) => [dir.slice(conformance.length + 1), file])))('%s/%s is reproduced byte for byte from its parsed values', (dir, file) => {
    const text = readFileSync(join(conformance, dir, file), 'utf8');
    expect(hfConfigJson(JSON.parse(text) as Record<string, unknown>)).toBe(text);
  });

  it("writes Python's float repr for float fields and ints as ints", () => {
    const text = hfConfigJson({ vocab_size: 32000, rms_norm_eps: 1e-5, rope_theta: 10000, initializer_range: 0.02, attention_dropout: 0, rope_scaling: { rope_type: 'llama3', factor: 32, original_max_position_embeddings: 8192 }, layer_norm_eps: 1e-16, eos_token_id: [1, 2] });
    expect(text).toBe(
      '{\n  "attention_dropout": 0.0,\n  "eos_token_id": [\n    1,\n    2\n  ],\n  "initializer_range": 0.02,\n  "layer_norm_eps": 1e-16,\n  "rms_norm_eps": 1e-05,\n' +
        '  "rope_scaling": {\n    "factor": 32.0,\n    "original_max_position_embeddings": 8192,\n    "rope_type": "llama3"\n  },\n  "rope_theta": 10000.0,\n  "vocab_size": 32000\n}\n',
    );
    expect(hfConfigJson({ rope_theta: 1e16, dropout: 0.0001, init_std: 0.00001 })).toBe('{\n  "dropout": 0.0001,\n  "init_std": 1e-05,\n  "rope_theta": 1e+16\n}\n');
  });

  it('refuses a value JSON cannot hold, naming the field', () => {
    expect(() => hfConfigJson({ vocab_size: 10n as unknown as number })).toThrow('hfConfigJson: vocab_size is a bigint');
  });
});
