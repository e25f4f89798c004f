import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EmbeddingWeights, HeadWeights, LayerTensors, OwnEndWeight } from '@flexhelm/contract';
import { afterAll, describe, expect, it } from 'vitest';
import { Engine } from './engine.js';
import { LlamaCheckpoint } from './llama-checkpoint.js';
import { makeHubModel } from './make-hub-model.js';
import { openTensorSource } from './open-tensor-source.js';
import { ReferenceBackend } from './reference-backend.js';
import type { TensorSource } from './tensor-source.js';

const root = mkdtempSync(join(tmpdir(), 'own-weights-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const IDS = [[3, 50, 96, 7, 7, 12, 40, 2]];
const MASK = IDS.map((r) => r.map(() => 1));

/**
 * A reference backend that holds `owned` of every layer, and the `ends`, from a copy of its own (as the oneDNN backend
 * holds a GGUF file's blocks).
 */
class OwningBackend extends ReferenceBackend {
  readonly given: string[][] = [];
  readonly givenEnds: number[] = [];
  constructor(
    private readonly full: LlamaCheckpoint,
    private readonly owned: ReadonlySet<string>,
    private readonly ends: ReadonlySet<OwnEndWeight>,
  ) {
    super();
  }
  ownLayerWeights(): ReadonlySet<string> {
    return this.owned;
  }
  ownEndWeights(): ReadonlySet<OwnEndWeight> {
    return this.ends;
  }
  override async loadEmbedding(weights: EmbeddingWeights): Promise<void> {
    this.givenEnds.push(weights.tokens.length);
    await super.loadEmbedding(this.ends.has('tokens') ? this.full.embedding() : weights);
  }
  override async loadHead(weights: HeadWeights): Promise<void> {
    this.givenEnds.push(weights.lmHead.length);
    await super.loadHead(this.ends.has('lmHead') ? this.full.head() : weights);
  }
  override async loadLayer(index: number, weights: LayerTensors): Promise<void> {
    this.given[index] = Object.keys(weights);
    const mine = this.full.layer(index);
    await super.loadLayer(index, { ...weights, ...Object.fromEntries([...this.owned].map((k) => [k, mine[k]!])) });
  }
}

function counting(source: TensorSource, log: string[]): TensorSource {
  const read = (name: string) => {
    log.push(name);
    return source.read(name);
  };
  return { tensors: source.tensors, read, close: () => source.close() };
}

/**
 * A tiny `base` model, its logits on the plain reference backend (`want`), and an engine on an `OwningBackend` holding
 * `owned` layer keys and the `ends` from its own copy, loaded through a source that logs every tensor it reads.
 */
async function owningEngine(base: string, name: string, seed: number, owned: string[], ends: OwnEndWeight[]) {
  const folder = join(root, name);
  makeHubModel({ config: { base, hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 300 }, outDir: folder, seed });
  const plain = await Engine.load(folder, { backend: 'reference' });
  const want = await plain.forwardLogits(IDS, MASK);
  await plain.close();
  const full = new LlamaCheckpoint(plain.description, openTensorSource(folder));
  const reads: string[] = [];
  const backend = new OwningBackend(full, new Set(owned), new Set(ends));
  const engine = await Engine.fromSource(plain.description, counting(openTensorSource(folder), reads), { backend });
  const close = async () => {
    await engine.close();
    full.close();
  };
  return { want, engine, backend, reads, close };
}

describe("a backend's own weights (DecoderBackend.ownLayerWeights, ownEndWeights)", () => {
  // Phi-3 fuses q/k/v into qkv_proj and gate/up into gate_up_proj; Llama keeps them apart.
  it.each([
    ['llama-3.2-1b', ['qW', 'kW', 'vW', 'gateW'], ['q_proj', 'k_proj', 'v_proj', 'gate_proj'], []],
    ['phi-3-mini-4k', ['qW', 'kW', 'vW', 'gateW'], ['qkv_proj'], ['gate_up_proj']],
  ])('%s: the engine neither reads nor passes them; the logits stay the same', async (base, owned, unread, stillRead) => {
    const { want, engine, backend, reads, close } = await owningEngine(base, base, 5, owned, []);
    try {
      expect(await engine.forwardLogits(IDS, MASK)).toEqual(want);
      for (const keys of backend.given) for (const k of owned) expect(keys).not.toContain(k);
      for (const part of unread) expect(reads.filter((n) => n.includes(`.${part}.`))).toEqual([]);
      // A fused tensor is read while any of its parts is wanted (gate_up_proj for up).
      for (const part of stillRead) expect(reads.filter((n) => n.includes(`.${part}.`))).toHaveLength(2);
    } finally {
      await close();
    }
  });

  // Llama 3.2 1B ties its head to the token table; Llama 3.1 8B has its own lm_head.
  it.each([
    ['llama-3.2-1b', ['tokens', 'lmHead'], 0, 0],
    ['llama-3.2-1b', ['tokens'], 1, 0],
    ['llama-3.2-1b', ['lmHead'], 1, 0],
    ['llama-3.1-8b', ['tokens'], 0, 1],
    ['llama-3.1-8b', ['lmHead'], 1, 0],
  ] as [string, OwnEndWeight[], number, number][])('%s owning %j of the ends: those are not read (a tied head reads the table the other end needs); the logits stay the same', async (base, ends, tableReads, headReads) => {
    const { want, engine, backend, reads, close } = await owningEngine(base, `${base}-ends-${ends.join('-')}`, 6, [], ends);
    try {
      expect(await engine.forwardLogits(IDS, MASK)).toEqual(want);
      const size = 300 * 64;
      expect(backend.givenEnds).toEqual([ends.includes('tokens') ? 0 : size, ends.includes('lmHead') ? 0 : size]);
      expect([reads.filter((n) => n.includes('embed_tokens')).length, reads.filter((n) => n.includes('lm_head')).length]).toEqual([tableReads, headReads]);
    } finally {
      await close();
    }
  });
});
