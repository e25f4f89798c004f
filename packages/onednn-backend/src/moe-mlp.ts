import { chosenExperts, expertOfTensor, isSparseLayer, layerTensorsOf, routeTokens, rowsByExpert, type ExpertSource, type ModelDescription, type TokenRoutes } from '@flexhelm/engine';
import type { ComputeDtype, LinearOptions, NativeBinding, NativeLinear, NativeQuantLinear, QuantWeight } from './native-addon.js';
import type { NativeDecoderBinding } from './native-decoder-layer.js';
import { storedBlocksOf } from './stored-blocks.js';

/** Width of the zero MLP the native layer of a mixture of experts carries: its output is then the residual stream. */
const ZERO_MLP = 16;

/** The dense MLP's keys in a rotary layer (a mixture of experts' dense layers have them; its sparse layers do not). */
const DENSE_MLP_KEYS = new Set(['gateW', 'gateB', 'upW', 'upB', 'downW', 'downB']);

/**
 * A weight as handed over: float32, f16 bits of a streamed matrix, or a GGUF file's blocks (`QuantWeight`: as the file
 * stores them, or — streamed — the backend's stored form read where the offloader keeps it); all multiplied as they are.
 */
type Weight = Float32Array | Uint16Array | QuantWeight;

/** One layer's MLP tensors in one dtype, and the GEMMs made from them so far (made when first needed). */
interface LayerMlp {
  tensors: Partial<Record<string, Weight>>;
  experts?: ExpertSource;
  linears: Map<string, Promise<NativeLinear | NativeQuantLinear>>;
}

/**
 * The MLP of a mixture of experts' layers (Mixtral, Qwen2-MoE), composed from native GEMMs beside the native layer:
 * the native rotary layer computes attention (its own MLP is a zero one, so it returns the residual stream `r`), and
 * this computes, as moe-reference.ts does,
 *
 *   x   = RMSNorm(r) · postNormW                       [N, H]
 *   routes = top-k of softmax(x · routerW)             [N, k]   (float32 GEMM; routeTokens' tie rule)
 *   r  += Σ_e w_ne · down_e(silu(gate_e(x_e)) · up_e(x_e))  for each chosen expert e over its rows x_e only
 *   r  += sigmoid(x · sharedExpertGateW) · shared(x)   (Qwen2-MoE's shared expert)
 *
 * and on dense layers `r += down(silu(gate(x)) · up(x))`. Each expert's GEMMs see all its rows at once. A streamed
 * layer handed over without its experts reads the ones its router chose from an `ExpertSource` (the expert as the unit
 * of offloading). Only the `pre` norm placement (every mixture-of-experts family's) is composed.
 */
export class MoeMlp {
  /** Time runs waited for experts read on demand (what of a layer's time is I/O, not compute). Milliseconds. */
  readonly stats = { expertWaitMs: 0 };
  private readonly layers = new Map<string, LayerMlp>();
  private zeros?: Record<string, Float32Array>;

  /**
   * `oneCall` (default true): routed experts run through the native `moeExperts` — all of a layer's chosen experts in
   * one call when they are at hand, each in a call of its own as it arrives when read on demand; false runs them one
   * native GEMM at a time (the plain path; tests compare the two).
   */
  constructor(
    readonly description: ModelDescription,
    private readonly native: NativeBinding & NativeDecoderBinding,
    private readonly linearOptions: (dtype: ComputeDtype) => LinearOptions,
    private readonly oneCall = true,
  ) {
    if (description.norm.placement !== 'pre') throw new Error(`OneDnnBackend: ${description.name}: a mixture of experts is composed for the 'pre' norm placement only, not '${description.norm.placement}'`);
  }

  /**
   * The description the native layer computes for every layer of `d`: its attention and norms with a zero SwiGLU MLP
   * of `ZERO_MLP` (no experts, no router), so the layer's output is `h + attention(…)`.
   */
  static attentionView(d: ModelDescription): ModelDescription {
    const H = d.hiddenSize;
    const attention = d.layerTensors.filter((t) => !isMlpKey(t.key));
    const zero = (key: string, shape: number[]) => ({ key, shape, group: 'mlp' as const, checkpointSuffix: `(zero MLP) ${key}` });
    const { moe: _moe, ...rest } = d;
    return { ...rest, mlp: { ...d.mlp, intermediateSize: ZERO_MLP, bias: false }, layerTensors: [...attention, zero('gateW', [H, ZERO_MLP]), zero('upW', [H, ZERO_MLP]), zero('downW', [ZERO_MLP, H])] };
  }

  /** Layer tensors split: what the native attention layer packs (with the zero MLP), and this MLP's. */
  split(w: Partial<Record<string, Weight>>): { attention: Partial<Record<string, Weight>>; mlp: Partial<Record<string, Weight>> } {
    const attention: Partial<Record<string, Weight>> = { ...this.zeroMlp() };
    const mlp: Partial<Record<string, Weight>> = {};
    for (const [key, t] of Object.entries(w)) {
      if (isMlpKey(key)) mlp[key] = t;
      else attention[key] = t;
    }
    // The MLP's input norm is both's: the native layer applies it to its zero MLP, this to the real one.
    if (w.postNormW) mlp.postNormW = w.postNormW;
    return { attention, mlp };
  }

  private zeroMlp(): Record<string, Float32Array> {
    const H = this.description.hiddenSize;
    this.zeros ??= { gateW: new Float32Array(H * ZERO_MLP), upW: new Float32Array(H * ZERO_MLP), downW: new Float32Array(ZERO_MLP * H) };
    return this.zeros;
  }

  /**
   * Layer `index`'s MLP tensors in `dtype` (`[in, out]`): all of a resident layer, or a streamed layer's for its next
   * runs (then `streamed`: decode-sized runs multiply the weights unpacked). Experts not among them come from `experts`.
   */
  set(dtype: ComputeDtype, index: number, tensors: Partial<Record<string, Weight>>, options: { streamed: boolean; experts?: ExpertSource }): void {
    this.release(dtype, index);
    this.layers.set(`${dtype}/${index}`, { tensors, experts: options.experts, linears: new Map() });
    this.streamed.set(`${dtype}/${index}`, options.streamed);
  }

  private readonly streamed = new Map<string, boolean>();

  /**
   * Makes layer `index`'s GEMMs on a GGUF file's blocks now (each a QuantLinear with its own reordered copy), letting
   * the file's blocks go as each is made: a resident mixture then holds every expert once, and the next layer's
   * reads reuse the memory (made on first use, every used expert would sit there twice until the end).
   */
  async prepareBlocks(dtype: ComputeDtype, index: number): Promise<void> {
    const layer = this.layers.get(`${dtype}/${index}`);
    if (!layer) return;
    const shapes = new Map(layerTensorsOf(this.description, index).map((t) => [t.key, t.shape]));
    for (const [key, w] of Object.entries(layer.tensors)) {
      const shape = shapes.get(key);
      if (!w || ArrayBuffer.isView(w) || w.stored || !shape) continue;
      await this.linear(dtype, index, layer, key, shape[0]!, shape[1]!);
    }
  }

  /** Reused scratch arrays by dtype and role (runs of one dtype never overlap). */
  private readonly scratchArrays = new Map<string, Float32Array>();

  /**
   * `n` floats of scratch for `role`, reused from call to call (64-byte aligned, from the addon): a decode step would
   * otherwise allocate some forty arrays a layer, and their external memory kept the collector busy (~15% of a
   * Mixtral-shaped decode step). Contents undefined.
   */
  private scratch(dtype: ComputeDtype, role: string, n: number): Float32Array {
    const key = `${dtype}/${role}`;
    let a = this.scratchArrays.get(key);
    if (!a || a.length < n) {
      a = this.native.allocFloat32(Math.max(n, 2 * (a?.length ?? 0)));
      this.scratchArrays.set(key, a);
    }
    return a.subarray(0, n);
  }

  /** Frees layer `index`'s GEMMs in `dtype` (every layer's and dtype's without arguments). */
  release(dtype?: ComputeDtype, index?: number): void {
    for (const key of dtype === undefined ? [...this.layers.keys()] : [`${dtype}/${index}`]) {
      this.layers.delete(key);
      this.streamed.delete(key);
    }
  }

  /** `r` `[N, H]` (the native attention layer's output) → `r + MLP(RMSNorm(r))` in place, for layer `index` in `dtype`. */
  async apply(dtype: ComputeDtype, index: number, r: Float32Array, N: number, onRoutes?: (routes: TokenRoutes) => void): Promise<void> {
    const d = this.description;
    const H = d.hiddenSize;
    const layer = this.layers.get(`${dtype}/${index}`);
    if (!layer) throw new Error(`OneDnnBackend: layer ${index}'s MLP (${dtype}) was not loaded`);
    const post = layer.tensors.postNormW;
    if (!(post instanceof Float32Array)) throw new Error(`OneDnnBackend: layer ${index} has no postNormW`);
    // x [N, H]: the MLP's input, rounded to bf16 as the native layer rounds its norms' outputs in a bf16 layer.
    const x = this.scratch(dtype, 'x', N * H);
    await this.native.rmsNorm(r, N, H, post, d.norm.eps, x, dtype === 'bf16');
    if (!isSparseLayer(d, index)) {
      const I = d.mlp.intermediateSize;
      await this.swiglu(dtype, index, layer, { gate: 'gateW', up: 'upW', down: 'downW' }, x, N, I, r, null);
      return;
    }
    const moe = d.moe!;
    // Router logits [N, E] in float32, then each token's experts and weights.
    const logits = this.scratch(dtype, 'logits', N * moe.experts);
    await (await this.linear(dtype, index, layer, 'routerW', H, moe.experts, 'fp32')).run(x, N, logits);
    const routes = routeTokens(moe, logits, N);
    onRoutes?.(routes);
    const ids = chosenExperts(routes);
    // Experts handed over with the layer, else read now from the source (all at once: each computes as it arrives).
    const arriving = layer.experts && !ids.every((e) => layer.tensors[`expert.${e}.gateW`]) ? layer.experts.read(index, ids) : undefined;
    // Qwen2-MoE's shared expert needs no routing, so it computes while the routed experts are read (the dense part of
    // the layer hides their I/O); its rows are added after the routed ones, the order the reference adds them in.
    const shared = moe.sharedExpertIntermediateSize === undefined ? undefined : await this.sharedExpert(dtype, index, layer, x, N, moe.sharedExpertIntermediateSize);
    const byExpert = rowsByExpert(routes, N);
    const I = moe.expertIntermediateSize;
    // Expert e's three GEMMs and its rows for `moeExperts`.
    const expertGemms = async (e: number) => {
      const { rows, weights } = byExpert.get(e)!;
      const [gate, up, down] = await Promise.all([this.linear(dtype, index, layer, `expert.${e}.gateW`, H, I), this.linear(dtype, index, layer, `expert.${e}.upW`, H, I), this.linear(dtype, index, layer, `expert.${e}.downW`, I, H)]);
      return { gate, up, down, rows: Int32Array.from(rows), weights: Float32Array.from(weights) };
    };
    if (!arriving && this.oneCall) {
      // Every chosen expert at hand: all of them in one native call (a decode step's sparse layer otherwise crosses
      // into the addon four times a chosen expert), the same arithmetic in the same order.
      await this.native.moeExperts(x, H, I, await Promise.all(ids.map(expertGemms)), r);
    } else {
      // Each expert as it arrives when read on demand (the next ones' reads go on meanwhile): one native call each,
      // or, without `oneCall`, one GEMM at a time — the plain path `moeExperts` must match.
      for (let i = 0; i < ids.length; i++) {
        const e = ids[i]!;
        if (arriving) {
          const waited = performance.now();
          // The offloader's stored blocks become the `{ type, blocks, stored }` the GEMMs read in place.
          Object.assign(layer.tensors, storedBlocksOf(await arriving[i]!));
          this.stats.expertWaitMs += performance.now() - waited;
        }
        if (this.oneCall) {
          await this.native.moeExperts(x, H, I, [await expertGemms(e)], r);
          continue;
        }
        const { rows, weights } = byExpert.get(e)!;
        const xs = this.scratch(dtype, 'xs', rows.length * H);
        rows.forEach((n, k) => {
          xs.set(x.subarray(n * H, (n + 1) * H), k * H);
        });
        await this.swiglu(dtype, index, layer, { gate: `expert.${e}.gateW`, up: `expert.${e}.upW`, down: `expert.${e}.downW` }, xs, rows.length, I, r, { rows, weights });
      }
    }
    if (shared) for (let i = 0; i < shared.length; i++) r[i] = r[i]! + shared[i]!;
  }

  /** `sigmoid(x · sharedExpertGateW) · shared(x)` `[N, H]` (each term rounded as `swiglu` rounds a scattered row). */
  private async sharedExpert(dtype: ComputeDtype, index: number, layer: LayerMlp, x: Float32Array, N: number, Is: number): Promise<Float32Array> {
    const H = this.description.hiddenSize;
    // gate [N, 1]
    const gate = this.scratch(dtype, 'sharedGate', N);
    await (await this.linear(dtype, index, layer, 'sharedExpertGateW', H, 1, 'fp32')).run(x, N, gate);
    const scale = Array.from(gate, (g) => 1 / (1 + Math.exp(-g)));
    const out = this.scratch(dtype, 'shared', N * H).fill(0);
    await this.swiglu(dtype, index, layer, { gate: 'sharedGateW', up: 'sharedUpW', down: 'sharedDownW' }, x, N, Is, out, { rows: Array.from({ length: N }, (_, n) => n), weights: scale });
    return out;
  }

  /**
   * `out` rows += `down(silu(gate(xs)) · up(xs))` of `xs` `[n, H]`: row k of the result goes to row `rows[k]` of `out`,
   * times `weights[k]` (`scatter`), or to row k unweighted (`null`: a dense MLP over every row).
   */
  private async swiglu(dtype: ComputeDtype, index: number, layer: LayerMlp, keys: { gate: string; up: string; down: string }, xs: Float32Array, n: number, I: number, out: Float32Array, scatter: { rows: number[]; weights: number[] } | null): Promise<void> {
    const H = this.description.hiddenSize;
    // gate(xs) then up(xs) side by side in one array: [g | u], each [n, I].
    const gu = this.scratch(dtype, 'gu', 2 * n * I);
    const g = gu.subarray(0, n * I);
    const u = gu.subarray(n * I);
    await Promise.all([
      this.linear(dtype, index, layer, keys.gate, H, I).then((l) => l.run(xs, n, g)),
      this.linear(dtype, index, layer, keys.up, H, I).then((l) => l.run(xs, n, u)),
    ]);
    // a = silu(g) · u   [n, I], natively: the two halves as one row of 2·n·I (the addon's `gated` of the dense MLP).
    const a = this.scratch(dtype, 'a', n * I);
    await this.native.gated(gu, 1, n * I, a);
    const down = await this.linear(dtype, index, layer, keys.down, I, H);
    if (!scatter) {
      await down.run(a, n, out, true);
      return;
    }
    const ys = this.scratch(dtype, 'ys', n * H);
    await down.run(a, n, ys);
    for (let k = 0; k < n; k++) {
      const row = scatter.rows[k]! * H;
      const w = scatter.weights[k]!;
      for (let i = 0; i < H; i++) out[row + i] = out[row + i]! + Math.fround(ys[k * H + i]! * w);
    }
  }

  /** The GEMM of tensor `key` (`[inF, outF]`) of layer `index`, made on first use (ggml blocks: a QuantLinear). */
  private linear(dtype: ComputeDtype, index: number, layer: LayerMlp, key: string, inF: number, outF: number, gemmDtype: ComputeDtype = dtype): Promise<NativeLinear | NativeQuantLinear> {
    let made = layer.linears.get(key);
    if (!made) {
      const w = layer.tensors[key];
      if (!w) throw new Error(`OneDnnBackend: layer ${index} has no ${key}`);
      if (!ArrayBuffer.isView(w)) {
        made = this.native.createQuantLinear(w.type, w.blocks, inF, outF, w.stored);
        layer.linears.set(key, made);
        // The linear keeps its own copy of a file's blocks (reordered for its kernels): the layer lets them go, or a
        // resident mixture would hold every expert twice once used. A stored form it borrows stays referenced by it.
        if (!w.stored) delete layer.tensors[key];
        return made;
      }
      const streamed = this.streamed.get(`${dtype}/${index}`) ?? false;
      // A streamed layer's decode-sized runs multiply its weights unpacked; larger ones pack them on first use.
      made = this.native.createLinear(w, null, inF, outF, { ...this.linearOptions(gemmDtype), transposed: true, ...(streamed ? { packAtRows: 256 } : {}) });
      layer.linears.set(key, made);
    }
    return made;
  }
}

/** Whether a layer tensor key belongs to the MLP a mixture of experts composes (experts, router, shared or dense MLP). */
export function isMlpKey(key: string): boolean {
  return DENSE_MLP_KEYS.has(key) || expertOfTensor(key) !== undefined || key === 'routerW' || key.startsWith('shared');
}
