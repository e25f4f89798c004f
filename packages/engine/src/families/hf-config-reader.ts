import { ModelFileError } from '../model-file-error.js';
import { MAX_TENSOR_ELEMENTS } from './opt/opt-config.js';
import type { RopeScaling } from '@flexhelm/contract';
import { ropeInvFreq } from '../rope-inv-freq.js';

/** Bounds like `checkOptConfig`'s: generous for real checkpoints, small enough to reject nonsense before allocating. */
export const HF_LIMITS = {
  vocab_size: 1_048_576,
  hidden_size: 65_536,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  intermediate_size: 262_144,
  max_position_embeddings: 16_777_216,
  head_dim: 65_536,
} as const;

/**
 * Checked reads of one `config.json` object: each read either returns a valid value (the family's default when the
 * key is absent) or throws a one-line `ModelFileError` naming the file, the field and what it may be.
 */
export class HfConfigReader {
  readonly c: Record<string, unknown>;

  constructor(
    json: unknown,
    readonly source: string,
  ) {
    if (typeof json !== 'object' || json === null || Array.isArray(json)) throw this.fail('is not a JSON object');
    this.c = json as Record<string, unknown>;
  }

  fail(message: string): ModelFileError {
    return new ModelFileError(`${this.source}: ${message}`);
  }

  /** An integer from 1 to `max` (`fallback` when absent or null). */
  int(key: string, max: number, fallback?: number): number {
    const v = this.c[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > max) throw this.fail(`${key} is ${JSON.stringify(this.c[key])}; it must be an integer from 1 to ${max}`);
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.c[key] ?? fallback;
    if (typeof v !== 'boolean') throw this.fail(`${key} is ${JSON.stringify(v)}; it must be true or false`);
    return v;
  }

  /** A finite number above 0 (and at most `max`). */
  positive(key: string, fallback: number, max = Number.MAX_VALUE): number {
    const v = this.c[key] ?? fallback;
    if (typeof v !== 'number' || !(v > 0) || !(v <= max)) throw this.fail(`${key} is ${JSON.stringify(v)}; it must be a number above 0${max < Number.MAX_VALUE ? ` and at most ${max}` : ''}`);
    return v;
  }

  /** A positive number, or undefined when the key is null (a feature turned off); `fallback` when absent. */
  optionalPositive(key: string, fallback: number | null): number | undefined {
    const v = key in this.c ? this.c[key] : fallback;
    if (v === null) return undefined;
    if (typeof v !== 'number' || !Number.isFinite(v) || !(v > 0)) throw this.fail(`${key} is ${JSON.stringify(v)}; it must be a number above 0 or null`);
    return v;
  }

  /** A positive integer, or undefined when null; `fallback` when absent. */
  optionalInt(key: string, fallback: number | null): number | undefined {
    const v = key in this.c ? this.c[key] : fallback;
    if (v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw this.fail(`${key} is ${JSON.stringify(v)}; it must be a positive integer or null`);
    return v;
  }

  /** A string among `allowed` (`fallback` when absent). */
  oneOf<T extends string>(key: string, allowed: readonly T[], fallback: T, why = ''): T {
    const v = this.c[key] ?? fallback;
    if (!allowed.includes(v as T)) throw this.fail(`${key} is ${JSON.stringify(v)}; ${why || `it must be ${allowed.map((a) => JSON.stringify(a)).join(' or ')}`}`);
    return v as T;
  }

  /** rms_norm_eps-like: above 0, at most 1, and not 0 in float32 (the kernels add it in float32). */
  eps(key: string, fallback: number): number {
    const eps = this.positive(key, fallback, 1);
    if (!(Math.fround(eps) > 0)) throw this.fail(`${key} is ${JSON.stringify(eps)}, which is 0 in float32; it must be at least ${Math.fround(1.401298464324817e-45)}`);
    return eps;
  }

  /** A special token id (or undefined; `fallback` when absent); a list (Llama 3.1's eos ids) is checked entry by entry and kept as none. */
  tokenId(key: string, vocab: number, fallback?: number): number | undefined {
    // transformers' default ids (Phi-3's 32000) only apply where the vocabulary has them (small test models do not).
    if (!(key in this.c)) return fallback !== undefined && fallback < vocab ? fallback : undefined;
    const v = this.c[key];
    const check = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < vocab;
    if (v === undefined || v === null) return undefined;
    if (Array.isArray(v)) {
      const bad = v.find((x) => !check(x));
      if (bad !== undefined || v.length === 0) throw this.fail(`${key} is ${JSON.stringify(v)}; every entry must be a token id from 0 to ${vocab - 1}`);
      return undefined;
    }
    if (!check(v)) throw this.fail(`${key} is ${JSON.stringify(v)}; it must be a token id from 0 to ${vocab - 1}`);
    return v;
  }

  /** `partial_rotary_factor` is refused unless absent or 1 (every kernel rotates the whole head). */
  fullRotary(): void {
    const v = this.c.partial_rotary_factor;
    if (v !== undefined && v !== null && v !== 1) throw this.fail(`partial_rotary_factor ${JSON.stringify(v)} is not supported; only 1 (rotary over the whole head_dim)`);
  }

  /** The attention sizes shared by the rotary families; `headDim` is the config's head_dim, its default, or hidden / heads. */
  attentionSizes(hidden: number, headDimKey: boolean, headDimDefault?: number): { heads: number; kvHeads: number; headDim: number } {
    const heads = this.int('num_attention_heads', HF_LIMITS.num_attention_heads);
    const kvHeads = this.int('num_key_value_heads', heads, heads);
    if (heads % kvHeads !== 0) throw this.fail(`num_attention_heads ${heads} is not a multiple of num_key_value_heads ${kvHeads}`);
    const hasHeadDim = headDimKey && ((this.c.head_dim !== undefined && this.c.head_dim !== null) || headDimDefault !== undefined);
    if (!hasHeadDim && hidden % heads !== 0) throw this.fail(`hidden_size ${hidden} is not divisible by num_attention_heads ${heads}${headDimKey ? '; set head_dim' : ''}`);
    const headDim = hasHeadDim ? this.int('head_dim', HF_LIMITS.head_dim, headDimDefault) : hidden / heads;
    if (headDim % 2 !== 0) throw this.fail(`head_dim ${headDim} is odd; rotary embeddings pair dimension i with i + head_dim/2`);
    return { heads, kvHeads, headDim };
  }

  /** Refuses sizes whose tensors one Float32Array cannot hold (before anything is allocated). */
  tensorSizes(tensors: [string, number][]): void {
    for (const [what, n] of tensors) if (n > MAX_TENSOR_ELEMENTS) throw this.fail(`the ${what} tensor would hold ${n} values, more than the ${MAX_TENSOR_ELEMENTS} one tensor may hold`);
  }

  /** What the kernels derive from rope_theta and rope_scaling must be finite (theta 1e-300 is 0 in float32: 1/0^x). */
  checkRope(headDim: number, theta: number, scaling: RopeScaling | undefined, maxPositions: number): void {
    const sets = scaling?.kind === 'longrope' ? [0, scaling.originalMaxPositions + 1] : [maxPositions];
    for (const seqLen of sets) {
      const invFreq = ropeInvFreq(headDim, theta, scaling, seqLen);
      const bad = invFreq.findIndex((f) => !(Number.isFinite(f) && f > 0));
      if (bad >= 0) {
        throw this.fail(`rope_theta ${JSON.stringify(theta)}${scaling ? ' with its rope_scaling' : ''} gives the rotary inverse frequency ${invFreq[bad]} for dimension pair ${bad}; it must be a number whose frequencies are finite and above 0 in float32 (Llama uses 10000 to 500000)`);
      }
    }
  }

  /** `rope_scaling` as transformers 4.47.1 reads it for the Llama-style families (`longrope` only where `allowLongrope`). */
  ropeScaling(maxPositions: number, headDim: number, allowLongrope: boolean): RopeScaling | undefined {
    const raw = this.c.rope_scaling;
    if (raw === undefined || raw === null) return undefined;
    if (typeof raw !== 'object' || Array.isArray(raw)) throw this.fail(`rope_scaling is ${JSON.stringify(raw)}; it must be an object or null`);
    const r = raw as Record<string, unknown>;
    // transformers accepts the legacy "type" key as well as "rope_type".
    const kind = r.rope_type ?? r.type;
    const num = (key: string, fallback?: number, min = 0): number => {
      const v = r[key] ?? fallback;
      if (typeof v !== 'number' || !Number.isFinite(v) || !(v > min)) throw this.fail(`rope_scaling.${key} is ${JSON.stringify(r[key])}; it must be a number above ${min}`);
      return v;
    };
    switch (kind) {
      case 'default':
        return undefined;
      case 'linear':
        return { kind: 'linear', factor: num('factor') };
      case 'dynamic':
        return { kind: 'dynamic', factor: num('factor'), originalMaxPositions: maxPositions };
      case 'llama3': {
        const s = {
          kind: 'llama3' as const,
          factor: num('factor'),
          lowFreqFactor: num('low_freq_factor'),
          highFreqFactor: num('high_freq_factor'),
          originalMaxPositions: num('original_max_position_embeddings'),
        };
        if (!(s.highFreqFactor > s.lowFreqFactor)) throw this.fail(`rope_scaling.high_freq_factor ${s.highFreqFactor} must be above low_freq_factor ${s.lowFreqFactor}`);
        return s;
      }
      case 'longrope':
        if (allowLongrope) return this.longrope(r, maxPositions, headDim);
        break;
    }
    throw this.fail(`rope_scaling.rope_type is ${JSON.stringify(kind)}; supported: default, linear, dynamic, llama3${allowLongrope ? ', longrope' : ''}`);
  }

  /**
   * Phi-3's longrope: `short_factor`/`long_factor` (head_dim/2 numbers above 0 each), the switch point
   * `original_max_position_embeddings` (a top-level key in Phi-3 configs) and the cos/sin factor transformers derives.
   */
  private longrope(r: Record<string, unknown>, maxPositions: number, headDim: number): RopeScaling {
    const factors = (key: string): number[] => {
      const v = r[key];
      if (!Array.isArray(v) || v.length !== headDim / 2 || v.some((x) => typeof x !== 'number' || !Number.isFinite(x) || !(x > 0))) {
        throw this.fail(`rope_scaling.${key} must be a list of head_dim/2 = ${headDim / 2} numbers above 0`);
      }
      return v as number[];
    };
    const shortFactor = factors('short_factor');
    const longFactor = factors('long_factor');
    const originalMaxPositions = this.int('original_max_position_embeddings', HF_LIMITS.max_position_embeddings, 4096);
    const ratio = maxPositions / originalMaxPositions;
    if (ratio > 1 && originalMaxPositions < 2) throw this.fail(`original_max_position_embeddings is ${originalMaxPositions}; with a longer max_position_embeddings it must be at least 2 (its logarithm divides)`);
    // 4.47.1 Phi3LongRoPEScaledRotaryEmbedding: sqrt(1 + ln(ratio) / ln(original)) once the context was extended.
    const cosSinScale = ratio <= 1 ? 1 : Math.sqrt(1 + Math.log(ratio) / Math.log(originalMaxPositions));
    return { kind: 'longrope', shortFactor, longFactor, originalMaxPositions, cosSinScale };
  }
}
