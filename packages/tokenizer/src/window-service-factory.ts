import { HelmError, type Tokenizer, type WindowService } from '@flexhelm/core';
import { Ai21WindowService, type Ai21TokenizerApi } from './ai21-window-service.js';
import { getTokenizer } from './get-tokenizer.js';
import { LocalWindowService } from './local-window-service.js';

export interface WindowServiceOptions {
  /** The tokenizer to count with instead of the model's own (e.g. `whitespace-stub`): a name or an instance. */
  tokenizer?: Tokenizer | string;
  /** For local OPT models: the model folder whose tokenizer files to load. */
  modelFolder?: string;
  /** For local models: the number of positions of the model (OPT: 2048). */
  maxPositions?: number;
  /** For `ai21/*`: access to AI21's tokenizer, which only exists behind AI21's API. */
  ai21Tokenizer?: Ai21TokenizerApi;
}

function resolveTokenizer(given: Tokenizer | string | undefined, fallback: () => Tokenizer, options: WindowServiceOptions): Tokenizer {
  if (given === undefined) return fallback();
  return typeof given === 'string' ? getTokenizer(given, { modelFolder: options.modelFolder }) : given;
}

/** HELM 0.2.1's `GPT2WindowService` (`huggingface/gpt2`): 1024 positions, requests up to 1025 tokens. */
export function gpt2WindowService(tokenizer: Tokenizer = getTokenizer('huggingface/gpt2')): LocalWindowService {
  return new LocalWindowService(tokenizer, {
    className: 'GPT2WindowService', tokenizerName: 'huggingface/gpt2', maxSequenceLength: 1024, maxRequestLength: 1025,
    endOfTextToken: '<|endoftext|>', prefixToken: '<|endoftext|>',
  });
}

/** HELM 0.2.1's `OPTWindowService` (`together/opt-66b`, `together/opt-175b`): 2048 positions, requests up to 2049 tokens. */
export function optWindowService(tokenizer: Tokenizer = getTokenizer('facebook/opt-66b')): LocalWindowService {
  return new LocalWindowService(tokenizer, {
    className: 'OPTWindowService', tokenizerName: 'facebook/opt-66b', maxSequenceLength: 2048, maxRequestLength: 2049,
    endOfTextToken: '</s>', prefixToken: '</s>',
  });
}

/**
 * The window of an OPT model run locally by flexhelm's engine. HELM's OPT window lets prompt + completion reach 2049
 * tokens because the Together API fed the prompt without BOS; the engine prepends `</s>` (BOS) to generation prompts, so
 * a request may hold at most `maxPositions` tokens (prompt + BOS + completion − 1 positions), and a language-modeling
 * window (`</s>` + `maxSequenceLength` tokens) must fit the positions too: `maxSequenceLength = maxPositions − 1`.
 */
export function localOptWindowService(tokenizer: Tokenizer, maxPositions = 2048): LocalWindowService {
  if (!Number.isInteger(maxPositions) || maxPositions < 2) {
    throw new HelmError('ValueError', `maxPositions must be an integer >= 2 (the model's max_position_embeddings), got ${maxPositions}`);
  }
  return new LocalWindowService(tokenizer, {
    className: 'LocalOPTWindowService', tokenizerName: tokenizer.name, maxSequenceLength: maxPositions - 1, maxRequestLength: maxPositions,
    endOfTextToken: '</s>', prefixToken: '</s>',
  });
}

const HELM_OFFLINE_UNSUPPORTED = /^(openai|simple|google|AlephAlpha|microsoft|anthropic|cohere|gooseai|together)\//;

/**
 * HELM 0.2.1's `WindowServiceFactory.get_window_service` for the models flexhelm can serve offline:
 * - `huggingface/gpt2`, `together/h3-2.7b` → GPT2WindowService;
 * - `together/opt-66b`, `together/opt-175b` → OPTWindowService;
 * - `ai21/*` → AI21WindowService (needs `options.ai21Tokenizer`);
 * - `local/<name>` and `facebook/opt-<size>` → the local OPT window (`options.maxPositions`, default 2048).
 */
export function getWindowService(modelName: string, options: WindowServiceOptions = {}): WindowService {
  if (modelName === 'huggingface/gpt2' || modelName === 'together/h3-2.7b') {
    return gpt2WindowService(resolveTokenizer(options.tokenizer, () => getTokenizer('huggingface/gpt2'), options));
  }
  if (modelName === 'together/opt-66b' || modelName === 'together/opt-175b') {
    return optWindowService(resolveTokenizer(options.tokenizer, () => getTokenizer('facebook/opt-66b', { modelFolder: options.modelFolder }), options));
  }
  if (modelName.startsWith('ai21/')) {
    if (!options.ai21Tokenizer) {
      throw new HelmError('ValueError', `${modelName} counts tokens with AI21's tokenizer, which only exists behind AI21's web API and cannot be run offline; pass options.ai21Tokenizer (e.g. recorded API answers) or use an OPT or GPT-2 model`);
    }
    return new Ai21WindowService(options.ai21Tokenizer, gpt2WindowService());
  }
  if (modelName.startsWith('local/') || /^facebook\/opt-[\w.-]+$/.test(modelName)) {
    const fallback = () => getTokenizer(/^facebook\/opt-/.test(modelName) ? modelName : 'facebook/opt-66b', { modelFolder: options.modelFolder });
    return localOptWindowService(resolveTokenizer(options.tokenizer, fallback, options), options.maxPositions);
  }
  if (HELM_OFFLINE_UNSUPPORTED.test(modelName)) {
    throw new HelmError('ValueError', `${modelName} is a HELM model whose tokenizer flexhelm cannot run offline; supported: huggingface/gpt2, together/h3-2.7b, together/opt-66b, together/opt-175b, ai21/* (with an AI21 tokenizer), local/<name>, facebook/opt-<size>`);
  }
  throw new HelmError('ValueError', `Unhandled model name: ${modelName}; supported: huggingface/gpt2, together/h3-2.7b, together/opt-66b, together/opt-175b, ai21/*, local/<name>, facebook/opt-<size>`);
}
