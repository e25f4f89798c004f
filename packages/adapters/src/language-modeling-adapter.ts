import { pySlice } from '@flexhelm/python-compat';
import { HelmError, request, requestState, type Instance, type RequestState, type ScenarioState, type TokenValue } from '@flexhelm/core';
import { Adapter } from './adapter.js';

function stripChar(s: string, ch: string, side: 'both' | 'left' | 'right'): string {
  let start = 0;
  let end = s.length;
  if (side !== 'right') while (start < end && s[start] === ch) start++;
  if (side !== 'left') while (end > start && s[end - 1] === ch) end--;
  return s.slice(start, end);
}

/**
 * `language_modeling` (HELM 0.2.1, after EleutherAI's lm_perplexity): each instance's text is cut into windows of at
 * most `max_sequence_length` predicted tokens. The first window is conditioned on the prefix token (`</s>` for OPT);
 * later ones on the preceding tokens, up to `max_request_length` tokens per request. Partial UTF-8 characters at the
 * window edges (decoded as U+FFFD) are stripped and the conditioning-token count is recomputed.
 */
export class LanguageModelingAdapter extends Adapter {
  /** Adapts every instance passed (language-modeling scenarios only have eval instances). */
  adapt(instances: readonly Instance[], parallelism = 1): ScenarioState {
    if (!Number.isInteger(parallelism) || parallelism < 1) throw new HelmError('ValueError', `parallelism must be a positive integer, got ${parallelism}`);
    return { adapter_spec: this.adapterSpec, request_states: instances.flatMap((inst) => this.generateRequests(inst)) };
  }

  generateRequests(evalInstance: Instance): RequestState[] {
    const ws = this.windowService;
    const spec = this.adapterSpec;
    const maxSequenceLength = ws.maxSequenceLength;
    const maxRequestLength = ws.maxRequestLength;
    const prefixToken = ws.prefixToken;
    const text = evalInstance.input.text;
    const tokens = ws.encode(text);
    const states: RequestState[] = [];
    // HELM passes `random` only with the first window's request.
    const addState = (prompt: string, numConditioningTokens: number, withRandom: boolean) =>
      states.push(
        requestState({
          instance: evalInstance,
          train_trial_index: 0,
          request: request({
            model: spec.model, prompt, num_completions: 1, temperature: 0, max_tokens: spec.max_tokens,
            stop_sequences: spec.stop_sequences, echo_prompt: true, random: withRandom ? spec.random : undefined,
          }),
          num_conditioning_tokens: numConditioningTokens,
          num_train_instances: spec.max_train_instances,
          prompt_truncated: false,
        }),
      );

    const firstSeqLen = Math.min(maxSequenceLength, tokens.length);
    const [firstPrompt] = this.constructLanguageModelingPrompt(ws.encode(prefixToken), tokens.slice(0, firstSeqLen), maxRequestLength, text);
    // HELM ignores the computed count for the first window: only the prefix token conditions it.
    addState(firstPrompt, prefixToken.length > 0 ? 1 : 0, true);

    let numPredicted = firstSeqLen;
    while (numPredicted < tokens.length) {
      const windowPredLen = Math.min(tokens.length - numPredicted, maxRequestLength - 1);
      const windowEnd = numPredicted + windowPredLen;
      const conditioning = pySlice(tokens, windowEnd - maxRequestLength, numPredicted);
      const pred = tokens.slice(numPredicted, windowEnd);
      const [prompt, numConditioningTokens] = this.constructLanguageModelingPrompt(conditioning, pred, maxRequestLength, text);
      addState(prompt, numConditioningTokens, false);
      numPredicted += windowPredLen;
    }
    return states;
  }

  /** The window's prompt with U+FFFD stripped from both ends, and how many of its tokens only condition. */
  constructLanguageModelingPrompt(conditioning: readonly TokenValue[], pred: readonly TokenValue[], maxReqLen: number, text: string): [string, number] {
    const [rawPrompt, fittedPred] = this.fitsTokensWithinContextWindow(conditioning, pred, maxReqLen, text);
    const prompt = stripChar(rawPrompt, '\ufffd', 'both');
    if (prompt.length === rawPrompt.length) return [prompt, conditioning.length];
    const ws = this.windowService;
    const leadingByteTokens = maxReqLen - ws.encode(stripChar(rawPrompt, '\ufffd', 'left')).length;
    const trailingByteTokens = maxReqLen - ws.encode(stripChar(rawPrompt, '\ufffd', 'right')).length;
    let numConditioning: number;
    if (trailingByteTokens >= fittedPred.length) numConditioning = ws.encode(prompt).length;
    else if (leadingByteTokens >= conditioning.length) numConditioning = 1;
    else numConditioning = conditioning.length - leadingByteTokens;
    return [prompt, numConditioning];
  }

  /** Decodes conditioning + predicted tokens; while the text re-encodes longer than allowed, drops predicted tokens. */
  fitsTokensWithinContextWindow(conditioning: readonly TokenValue[], pred: readonly TokenValue[], maxReqLen: number, text?: string): [string, TokenValue[]] {
    const ws = this.windowService;
    let kept = [...pred];
    let prompt = ws.decode([...conditioning, ...kept], text);
    let promptLength = ws.encode(prompt).length;
    while (promptLength > maxReqLen) {
      kept = pySlice(kept, 0, -(promptLength - maxReqLen));
      prompt = ws.decode([...conditioning, ...kept], text);
      promptLength = ws.encode(prompt).length;
      if (kept.length === 0) {
        throw new HelmError('ValueError', 'Truncating pred_tokens to fit them in the context window, got len(pred_tokens) == 0, which will lead to an infinite loop.');
      }
    }
    return [prompt, kept];
  }
}
