import { pyFloat, pyJsonDumps, type PyJsonValue } from '@flexhelm/python-compat';

/**
 * Fields transformers declares as `float` in the configs flexhelm writes (OPT and the rotary families, their
 * `rope_scaling`, and generation settings). JSON has one number type, so a parsed `10000.0` is the integer 10000 in
 * JavaScript; these names say which values Python holds (and prints) as floats.
 */
export const HF_FLOAT_FIELDS: ReadonlySet<string> = new Set([
  // OPT
  'activation_dropout', 'attention_dropout', 'dropout', 'init_std', 'layerdrop',
  // Llama family
  'initializer_range', 'rms_norm_eps', 'rope_theta', 'layer_norm_eps', 'partial_rotary_factor',
  // Gemma 2's soft-caps, Phi-3's dropouts
  'attn_logit_softcapping', 'final_logit_softcapping', 'embd_pdrop', 'resid_pdrop',
  // rope_scaling
  'factor', 'short_factor', 'long_factor', 'high_freq_factor', 'low_freq_factor', 'attention_factor', 'beta_fast', 'beta_slow', 'mscale', 'mscale_all_dim',
  // generation_config.json
  'temperature', 'top_p', 'repetition_penalty', 'length_penalty', 'diversity_penalty', 'typical_p', 'epsilon_cutoff', 'eta_cutoff',
]);

/** A plain JSON value as Python holds it: known float fields boxed as floats, every object's keys sorted (recursively). */
function toPython(value: unknown, key: string | undefined): PyJsonValue {
  if (typeof value === 'number') return key !== undefined && HF_FLOAT_FIELDS.has(key) ? pyFloat(value) : value;
  if (Array.isArray(value)) return value.map((item) => toPython(item, key));
  if (value !== null && typeof value === 'object') {
    // sort_keys=True: Python compares code points; config keys are ASCII, where UTF-16 order is the same.
    return new Map(Object.keys(value).sort().map((k) => [k, toPython((value as Record<string, unknown>)[k], k)]));
  }
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  throw new TypeError(`hfConfigJson: ${key ?? 'the value'} is a ${typeof value}, which JSON cannot hold`);
}

/**
 * A config as transformers 4.47.1's `save_pretrained` writes it (`PretrainedConfig.to_json_string` /
 * `GenerationConfig.to_json_string`): `json.dumps(config, indent=2, sort_keys=True) + "\n"`, with Python's float repr
 * (`1e-05`, `10000.0`, `0.02`) for the float fields and ints as ints.
 */
export function hfConfigJson(config: Record<string, unknown>): string {
  return `${pyJsonDumps(toPython(config, undefined), 2)}\n`;
}
