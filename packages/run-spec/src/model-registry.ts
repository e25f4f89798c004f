import { HelmError } from '@flexhelm/core';
import { shortRepr } from '@flexhelm/python-compat';

/** Model tags of HELM 0.2.1 (`proxy/models.py`). */
export const MODEL_TAGS = {
  text: 'text',
  image: 'image',
  code: 'code',
  embedding: 'embedding',
  fullFunctionalityText: 'full_functionality_text',
  limitedFunctionalityText: 'limited_functionality_text',
  widerContextWindow: 'wider_context_window',
  gpt2Tokenizer: 'gpt2_tokenizer',
  ai21Tokenizer: 'ai21_tokenizer',
  cohereTokenizer: 'cohere_tokenizer',
  optTokenizer: 'opt_tokenizer',
  gptjTokenizer: 'gptj_tokenizer',
  gptneoTokenizer: 'gptneo_tokenizer',
  ablation: 'ablation',
  noNewlines: 'no_newlines',
  nlgPrefix: 'nlg_prefix_tag',
} as const;

/** A model HELM 0.2.1 knows: `group` is the quota group, `tags` drive model families and `alter_run_spec`. */
export interface Model {
  name: string;
  group: string;
  tags: readonly string[];
}

// Tag shorthands for the table below; order inside each list follows HELM's.
const T = 'text', FULL = 'full_functionality_text', LIM = 'limited_functionality_text', IMG = 'image', CODE = 'code';
const EMB = 'embedding', WIDE = 'wider_context_window', ABL = 'ablation', NONL = 'no_newlines', NLG = 'nlg_prefix_tag';
const GPT2 = 'gpt2_tokenizer', AI21 = 'ai21_tokenizer', COH = 'cohere_tokenizer', OPT = 'opt_tokenizer';
const GPTJ = 'gptj_tokenizer', NEO = 'gptneo_tokenizer';

const m = (name: string, group: string, ...tags: string[]): Model => ({ name, group, tags });

/** Every model of HELM 0.2.1, in `ALL_MODELS` order (families such as `model=text` keep this order). */
export const ALL_MODELS: readonly Model[] = [
  m('ai21/j1-jumbo', 'jurassic', T, FULL, AI21),
  m('ai21/j1-grande', 'jurassic', T, FULL, AI21),
  m('ai21/j1-grande-v2-beta', 'jurassic', T, FULL, AI21),
  m('ai21/j1-large', 'jurassic', T, FULL, AI21),
  m('AlephAlpha/luminous-base', 'luminous', T, IMG, LIM),
  m('AlephAlpha/luminous-extended', 'luminous', T, IMG, LIM),
  m('AlephAlpha/luminous-supreme', 'luminous', T, LIM),
  m('anthropic/stanford-online-all-v4-s3', 'anthropic', T, FULL, GPT2, ABL),
  m('together/bloom', 'together', T, FULL, ABL),
  m('together/t0pp', 'together', T, LIM, ABL, NONL),
  m('cohere/xlarge-20220609', 'cohere', T, FULL, COH),
  m('cohere/xlarge-20221108', 'cohere', T, FULL, COH),
  m('cohere/large-20220720', 'cohere', T, FULL, COH),
  m('cohere/medium-20220720', 'cohere', T, FULL, COH),
  m('cohere/medium-20221108', 'cohere', T, FULL, COH),
  m('cohere/small-20220720', 'cohere', T, FULL, COH),
  m('together/gpt-j-6b', 'together', T, FULL, ABL, GPTJ),
  m('together/gpt-neox-20b', 'together', T, FULL, ABL, NEO),
  m('gooseai/gpt-neo-20b', 'gooseai', T, FULL, NEO),
  m('gooseai/gpt-j-6b', 'gooseai', T, FULL, GPTJ),
  m('huggingface/gpt2', 'huggingface', T, FULL, GPT2),
  m('huggingface/gpt-j-6b', 'huggingface', T, FULL, GPTJ),
  m('huggingface/santacoder', 'huggingface', CODE),
  m('together/t5-11b', 'together', T, LIM, ABL, NONL),
  m('together/ul2', 'together', T, LIM, ABL, NONL, NLG),
  m('together/h3-2.7b', 'together', T, FULL, GPT2),
  m('together/opt-175b', 'together', T, FULL, ABL, OPT),
  m('together/opt-66b', 'together', T, FULL, ABL, OPT),
  m('microsoft/TNLGv2_530B', 'microsoft', T, FULL, GPT2),
  m('microsoft/TNLGv2_7B', 'microsoft', T, FULL, GPT2),
  m('openai/davinci', 'gpt3', T, FULL, GPT2),
  m('openai/curie', 'gpt3', T, FULL, GPT2),
  m('openai/babbage', 'gpt3', T, FULL, GPT2),
  m('openai/ada', 'gpt3', T, FULL, GPT2),
  m('openai/text-davinci-003', 'gpt3', T, WIDE, FULL, GPT2),
  m('openai/text-davinci-002', 'gpt3', T, WIDE, FULL, GPT2),
  m('openai/text-davinci-001', 'gpt3', T, FULL, GPT2),
  m('openai/text-curie-001', 'gpt3', T, FULL, GPT2),
  m('openai/text-babbage-001', 'gpt3', T, FULL, GPT2),
  m('openai/text-ada-001', 'gpt3', T, FULL, GPT2),
  m('openai/code-davinci-002', 'codex', CODE, WIDE, GPT2),
  m('openai/code-davinci-001', 'codex', CODE, GPT2),
  m('openai/code-cushman-001', 'codex', CODE, GPT2),
  m('openai/chat-gpt', 'gpt3', T, WIDE, LIM, GPT2),
  m('openai/text-similarity-davinci-001', 'gpt3', EMB),
  m('openai/text-similarity-curie-001', 'gpt3', EMB),
  m('openai/text-similarity-babbage-001', 'gpt3', EMB),
  m('openai/text-similarity-ada-001', 'gpt3', EMB),
  m('together/gpt-jt-6b-v1', 'together', T, FULL, GPTJ),
  m('together/glm', 'together', T, LIM, ABL, NONL),
  m('together/yalm', 'together', T, LIM, ABL),
  m('google/palm', 'google', T, LIM),
  m('simple/model1', 'simple'),
];

const BY_NAME = new Map(ALL_MODELS.map((model) => [model.name, model]));

/**
 * Models run locally by flexhelm (e.g. `facebook/opt-30b`), added at run time so run specs can name the model that
 * actually runs. They have no tags (like HELM's OPT models) and join no `model=<family>` expansion.
 */
const LOCAL_MODELS = new Map<string, Model>();

/** Registers a local model name (idempotent); HELM's own names are already known and are left as they are. */
export function registerLocalModel(name: string): Model {
  if (!/^[\w.-]+\/[\w.-]+$/.test(name)) {
    throw new HelmError('ValueError', `local model names are written organization/name (e.g. facebook/opt-1.3b), got ${JSON.stringify(name)}`);
  }
  const known = BY_NAME.get(name) ?? LOCAL_MODELS.get(name);
  if (known) return known;
  const model: Model = { name, group: name.split('/')[0]!, tags: [] };
  LOCAL_MODELS.set(name, model);
  return model;
}

/** HELM's `get_model`: the model called `name` (or a registered local model), or a ValueError naming close matches. */
export function getModel(name: unknown): Model {
  const model = typeof name === 'string' ? (BY_NAME.get(name) ?? LOCAL_MODELS.get(name)) : undefined;
  if (model) return model;
  const text = String(name);
  const close = ALL_MODELS.map((mm) => mm.name).filter((n) => text !== '' && (n.includes(text) || text.includes(n.split('/')[1]!) /* every registry name is org/name */));
  throw new HelmError(
    'ValueError',
    `No model with name: ${text.length > 80 ? shortRepr(text) : text}` +
      (text === '' ? ' (no model was given: add model=<name> or a family such as model=text to the description)' : '') +
      (close.length ? `; did you mean ${close.slice(0, 5).join(', ')}?` : '; `flexhelm run-specs --list models` lists the models and `--list families` the model=<family> names'),
  );
}

export function getAllModels(): string[] {
  return ALL_MODELS.map((model) => model.name);
}

export function getModelNamesWithTag(tag: string): string[] {
  return ALL_MODELS.filter((model) => model.tags.includes(tag)).map((model) => model.name);
}

export function getAllTextModels(): string[] {
  return getModelNamesWithTag(MODEL_TAGS.text);
}

export function getAllCodeModels(): string[] {
  return getModelNamesWithTag(MODEL_TAGS.code);
}
