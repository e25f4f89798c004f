import type { ModelDescription } from '@flexhelm/contract';
import { linear } from './families/opt/opt-reference.js';

const silu = (z: number) => z / (1 + Math.exp(-z));
/** `gelu_pytorch_tanh`: 0.5·z·(1 + tanh(sqrt(2/π)·(z + 0.044715·z³))). */
const geluTanh = (z: number) => 0.5 * z * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (z + 0.044715 * z * z * z)));

/** The weights of one gated MLP, checkpoint layout `[out, in]`: gate and up `[I, H]`, down `[H, I]`. */
export interface GatedMlpWeights {
  gate: Float32Array;
  up: Float32Array;
  down: Float32Array;
  gateB?: Float32Array;
  upB?: Float32Array;
  downB?: Float32Array;
}

/**
 * `down(act(gate(x)) · up(x))` of `x` `[N, H]` → `[N, H]` with intermediate size `I`; act = SiLU (SwiGLU) or tanh GELU
 * (GeGLU), by `kind`; only the gate gets it. The dense MLP of the rotary families and every expert of a mixture.
 */
export function gatedMlp(d: ModelDescription, kind: ModelDescription['mlp']['kind'], w: GatedMlpWeights, x: Float32Array, N: number, I: number): Float32Array {
  const H = d.hiddenSize;
  const act = kind === 'geglu-tanh' ? geluTanh : kind === 'swiglu' ? silu : undefined;
  if (!act) throw new Error(`${d.name}: the rotary layer computes swiglu and geglu-tanh MLPs, not ${kind}`);
  // gate, up [N, I]
  const gate = linear(x, N, H, w.gate, I, w.gateB);
  const up = linear(x, N, H, w.up, I, w.upB);
  for (let i = 0; i < gate.length; i++) gate[i] = act(gate[i]!) * up[i]!;
  return linear(gate, N, I, w.down, H, w.downB);
}
