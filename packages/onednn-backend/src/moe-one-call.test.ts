import { descriptionByName, type ModelDescription } from '@flexhelm/engine';
import { quantize } from '@flexhelm/gguf';
import { describe, expect, it } from 'vitest';
import { MoeMlp } from './moe-mlp.js';
import { oneDnnStatus, requireBinding, type ComputeDtype, type NativeBinding, type QuantType } from './native-addon.js';
import type { NativeDecoderBinding } from './native-decoder-layer.js';

const available = oneDnnStatus().available;

// Mixtral's description, narrowed: 4 experts of 96 over a hidden size of 64, top 2.
const H = 64;
const I = 96;
const E = 4;
const base = descriptionByName('mixtral-8x7b');
const description: ModelDescription = { ...base, hiddenSize: H, layers: 1, moe: { ...base.moe!, experts: E, expertIntermediateSize: I, sparseLayers: [0] } };

function noise(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return ((s / 2 ** 32) * 2 - 1) * scale;
  });
}

/** One sparse layer's MLP tensors: float32 `[in, out]` matrices, or the experts as ggml blocks of `type`. */
function layerTensors(type?: QuantType) {
  const t: Record<string, Float32Array | { type: QuantType; blocks: Uint8Array }> = { postNormW: noise(H, 1, 1).map((v) => 1 + v), routerW: noise(H * E, 2, 0.5) };
  for (let e = 0; e < E; e++) {
    const matrix = (name: string, inF: number, outF: number, seed: number) => {
      const w = noise(inF * outF, seed, 0.1);
      // Blocks are GGUF's [out, in] rows of `in` values; a float matrix is given [in, out].
      t[`expert.${e}.${name}`] = type ? { type, blocks: quantize(type, w) } : w;
    };
    matrix('gateW', H, I, 10 + e);
    matrix('upW', H, I, 20 + e);
    matrix('downW', I, H, 30 + e);
  }
  return t;
}

/**
 * `r + MLP(RMSNorm(r))` for N rows, the routed experts in native calls (`oneCall`) or one GEMM at a time; `onDemand`:
 * the experts are not handed over with the layer but read when routed (each arrives on a later turn, as from disk).
 */
async function apply(oneCall: boolean, dtype: ComputeDtype, type: QuantType | undefined, N: number, onDemand = false): Promise<Float32Array> {
  const binding = requireBinding() as NativeBinding & NativeDecoderBinding;
  let calls = 0;
  const native: typeof binding = Object.assign(Object.create(binding), {
    moeExperts: (...args: Parameters<typeof binding.moeExperts>) => {
      calls++;
      return binding.moeExperts(...args);
    },
  });
  const mlp = new MoeMlp(description, native, (d) => ({ dtype: d }), oneCall);
  const tensors = layerTensors(type);
  const reads: number[][] = [];
  if (onDemand) {
    const held = Object.fromEntries(Object.entries(tensors).filter(([key]) => !key.startsWith('expert.')));
    const experts = {
      read: (_index: number, ids: readonly number[]) => {
        reads.push([...ids]);
        return ids.map((e) => new Promise<typeof tensors>((resolve) => setTimeout(() => resolve(Object.fromEntries(Object.entries(layerTensors(type)).filter(([key]) => key.startsWith(`expert.${e}.`)))), 5)));
      },
    };
    mlp.set(dtype, 0, held, { streamed: true, experts: experts as never });
  } else {
    mlp.set(dtype, 0, tensors, { streamed: false });
  }
  const r = noise(N * H, 7 + N, 2);
  await mlp.apply(dtype, 0, r, N);
  if (onDemand) {
    expect(reads).toHaveLength(1);
    // One call an expert as it arrives (top 2 of 4: a decode row routes to two), none on the plain path.
    expect(calls).toBe(oneCall ? reads[0]!.length : 0);
    if (N === 1) expect(reads[0]).toHaveLength(2);
  }
  return r;
}

describe.skipIf(!available)('MoeMlp: the routed experts in one native call (moeExperts)', () => {
  it.each([
    ['fp32', undefined],
    ['bf16', undefined],
    ['fp32', 'Q8_0'],
    ['fp32', 'Q4_0'],
  ] as const)('%s, experts %s: the same bits as one expert at a time, for a decode row and for 9 rows', async (dtype, type) => {
    for (const N of [1, 9]) {
      const one = await apply(true, dtype, type, N);
      const each = await apply(false, dtype, type, N);
      expect(one).toEqual(each);
      // The MLP added something to every row.
      const before = noise(N * H, 7 + N, 2);
      for (let n = 0; n < N; n++) expect(one.subarray(n * H, (n + 1) * H)).not.toEqual(before.subarray(n * H, (n + 1) * H));
    }
  });

  it.each([
    ['fp32', undefined],
    ['fp32', 'Q4_0'],
  ] as const)('%s, experts %s read on demand: one native call as each arrives, the same bits as resident one GEMM at a time', async (dtype, type) => {
    for (const N of [1, 9]) {
      const each = await apply(false, dtype, type, N);
      expect(await apply(true, dtype, type, N, true)).toEqual(each);
      expect(await apply(false, dtype, type, N, true)).toEqual(each);
    }
  });

  it('refuses what is not a GEMM of the right shape, and rows outside x, in one line', async () => {
    const native = requireBinding() as NativeBinding & NativeDecoderBinding;
    const gemm = (inF: number, outF: number) => native.createLinear(noise(inF * outF, 3, 0.1), null, inF, outF, { dtype: 'fp32' });
    const [gate, up, down] = await Promise.all([gemm(H, I), gemm(H, I), gemm(I, H)]);
    const x = new Float32Array(2 * H);
    const out = new Float32Array(2 * H);
    const expert = { gate, up, down, rows: Int32Array.of(0, 1), weights: Float32Array.of(0.5, 0.5) };
    expect(() => native.moeExperts(x, H, I, [{ ...expert, down: up }], out)).toThrow(/experts\[0\]\.down is 64 → 96, expected 96 → 64/);
    expect(() => native.moeExperts(x, H, I, [{ ...expert, gate: {} as typeof gate }], out)).toThrow(/experts\[0\]\.gate: give a Linear or a QuantLinear/);
    expect(() => native.moeExperts(x, H, I, [{ ...expert, rows: Int32Array.of(0, 2) }], out)).toThrow(/rows\[1\] = 2 is not a row of x \(0 … 1\)/);
    expect(() => native.moeExperts(x, H, I, [{ ...expert, weights: Float32Array.of(1) }], out)).toThrow(/rows and weights must be equally long/);
    expect(() => native.moeExperts(x, H, I, [expert], new Float32Array(H))).toThrow(/out/);
  });
});
