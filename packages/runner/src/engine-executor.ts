import { toNumber } from '@flexhelm/python-compat';
import { createHash } from 'node:crypto';
import { requestResult, type Request, type RequestResult, type Sequence, type Token, type Tokenizer } from '@flexhelm/core';
import { generate, NonFiniteOutputError, RequestMemoryError, type Completion, type ForwardBatch, type GenerationRequest, type Engine, type ScoredToken } from '@flexhelm/engine';
import { EngineSetupError } from './engine-setup-error.js';
import { promptInput } from './prompt-bos-id.js';
import type { ExecutionProgress, RequestExecutor } from './request-executor.js';
import { truncateSequence } from './truncate-sequence.js';

export interface EngineExecutorOptions {
  /** Identity of the model for the request cache (weights, config, compute dtype). */
  modelId: string;
  /** Requests handed to the engine at once; the engine groups them by prompt length into batches. */
  chunkSize?: number;
  /** Rows (prompt × completion) per forward batch: FlexLLMGen's effective batch, gpu_batch_size × num_gpu_batches. */
  maxBatchSize?: number;
  /** Added to every request's sampling seed (the CLI's `--seed`). */
  seed?: number;
  /**
   * helm_run.py's `--pad-to-seq-len`: engine batches are left-padded to a fixed prompt length, the longest prompt of
   * the call rounded up to a multiple of 256 but at most this (as helm_run.py shrinks it). Results do not change;
   * a longer prompt is an `EngineSetupError`.
   */
  padToSeqLen?: number;
}

/** helm_run.py's auto-adjustment: pad to the longest prompt rounded up to 256, capped at `--pad-to-seq-len`. */
export function paddedPromptLength(longest: number, padToSeqLen: number): number {
  if (longest > padToSeqLen) {
    throw new EngineSetupError(`a prompt of ${longest} tokens is longer than --pad-to-seq-len ${padToSeqLen}: give --pad-to-seq-len ${longest} or more, or leave it out`);
  }
  return Math.min(Math.ceil(longest / 256) * 256, padToSeqLen);
}

/** A request's seed for sampling: from HELM's `random` field when set (so re-runs of a sampled request differ), else 0. */
function seedOf(request: Request): number {
  if (request.random === undefined) return 0;
  return createHash('sha256').update(request.random).digest().readUInt32LE(0);
}

/**
 * HELM's timing fields for each request of a `generate` call, from the forward batches it reported. `batch_size` is
 * the number of sequences (prompt × completion rows) that shared the forward passes computing the request's
 * completions, and `batch_request_time` the wall time of those passes, so HELM's `inference_denoised_runtime` (batch
 * time ÷ batch size) is the time per sequence. `request_time` is the request's own share: each batch's time × its rows
 * in that batch ÷ the batch's rows. A request needing no forward pass (no new tokens, no echo) took no time and has no
 * batch.
 *
 * `request_datetime` is what HELM's `wrap_request_time` writes for every client using it (HuggingFaceClient
 * included): `int(start_time)`, the Unix second at which the request's computation started, here the start of the
 * first forward batch it rode in (`startedAt`, epoch seconds), or `calledAt` (when `generate` was called) for a
 * request that needed none.
 */
export function batchTimes(
  requests: number,
  batches: readonly (ForwardBatch & { startedAt: number })[],
  calledAt: number,
): Pick<RequestResult, 'request_time' | 'request_datetime' | 'batch_size' | 'batch_request_time'>[] {
  const times = Array.from({ length: requests }, () => ({ request_time: 0, started: calledAt, batch_size: 0, batch_request_time: 0 }));
  for (const batch of batches) {
    const own = new Map<number, number>();
    for (const [request] of batch.rows) own.set(request, (own.get(request) ?? 0) + 1);
    for (const [request, rows] of own) {
      const t = times[request]!;
      if (t.batch_size === 0 || batch.startedAt < t.started) t.started = batch.startedAt;
      t.batch_size += batch.rows.length;
      t.batch_request_time += batch.seconds;
      t.request_time += (batch.seconds * rows) / batch.rows.length;
    }
  }
  return times.map(({ started, ...t }) => {
    const request_datetime = Math.floor(started);
    return t.batch_size === 0 ? { request_time: 0, request_datetime } : { request_time: t.request_time, request_datetime, batch_size: t.batch_size, batch_request_time: t.batch_request_time };
  });
}

/**
 * Runs HELM requests on flexhelm's OPT engine, the way HELM's Together/OpenAI clients return results, with the
 * logprobs FlexLLMGen never computed:
 * - the prompt is encoded without special tokens and `</s>` (BOS) is prepended unless the prompt already starts
 *   with it (HELM's language-modeling prompts do), so the model sees what Hugging Face's OPT tokenizer would give it;
 *   other families get the BOS their tokenizer adds, and none where it adds none (Qwen2; `promptBosId`);
 * - each request keeps its own temperature (0 = greedy), top_p, n, max_tokens, stop sequences, top_k_per_token and
 *   echo; sampled requests draw from a seed derived from the request's `random` field;
 * - token texts are the decoded text of each token (so `truncate_sequence` and byte counts work on text);
 * - echoed prompt tokens carry their real logprob (the very first token of the model input has none: 0.0);
 * - completions pass through HELM's `truncate_sequence`.
 */
export class EngineExecutor implements RequestExecutor {
  readonly modelId: string;
  private readonly tokenText = new Map<number, string>();

  constructor(
    readonly engine: Engine,
    readonly tokenizer: Tokenizer,
    private readonly options: EngineExecutorOptions,
  ) {
    this.modelId = options.modelId;
  }

  private text(id: number): string {
    let t = this.tokenText.get(id);
    if (t === undefined) {
      t = this.tokenizer.decode([id]);
      this.tokenText.set(id, t);
    }
    return t;
  }

  private decode = (ids: number[]): string => (ids.length === 0 ? '' : this.tokenizer.decode(ids));

  private encodePrompt(prompt: string): { ids: number[]; addedBos: boolean } {
    const ids = prompt === '' ? [] : this.tokenizer.encode(prompt).map(Number);
    return promptInput(ids, this.engine, this.tokenizer);
  }

  private token(t: ScoredToken): Token {
    const top = new Map<string, number>();
    for (const alt of t.top) {
      const text = this.text(alt.id);
      if (!top.has(text)) top.set(text, alt.logprob);
    }
    return { text: this.text(t.id), logprob: t.logprob ?? 0, top_logprobs: top };
  }

  private toSequence(request: Request, prompt: { ids: number[]; addedBos: boolean }, completion: Completion): Sequence {
    const generatedIds = completion.tokens.map((t) => t.id);
    const tokens: Token[] = [];
    let text = this.decode(generatedIds);
    if (request.echo_prompt) {
      const promptTokens = (completion.promptTokens ?? []).slice(prompt.addedBos ? 1 : 0);
      tokens.push(...promptTokens.map((t) => this.token(t)));
      text = request.prompt + text;
    }
    tokens.push(...completion.tokens.map((t) => this.token(t)));
    const reason = completion.finishReason === 'eos' ? 'endoftext' : completion.finishReason;
    const sequence: Sequence = {
      text,
      logprob: tokens.reduce((s, t) => s + t.logprob, 0),
      tokens,
      finish_reason: { reason },
    };
    return truncateSequence(sequence, request);
  }

  async execute(requests: readonly Request[], onProgress?: (p: ExecutionProgress) => void): Promise<RequestResult[]> {
    const chunk = Math.max(1, this.options.chunkSize ?? 64);
    const results: RequestResult[] = [];
    let generatedTokens = 0;
    for (let start = 0; start < requests.length; start += chunk) {
      const part = requests.slice(start, start + chunk);
      const prompts = part.map((r) => this.encodePrompt(r.prompt));
      const genRequests: GenerationRequest[] = part.map((r, i) => ({
        prompt: prompts[i]!.ids,
        maxNewTokens: r.max_tokens,
        temperature: toNumber(r.temperature),
        topP: toNumber(r.top_p),
        n: r.num_completions,
        seed: (seedOf(r) + (this.options.seed ?? 0)) >>> 0,
        stopSequences: r.stop_sequences,
        echoPrompt: r.echo_prompt,
        topLogprobs: r.top_k_per_token,
      }));
      genRequests.forEach((g, i) => {
        try {
          this.engine.checkRequestMemory({ promptTokens: g.prompt.length, newTokens: g.maxNewTokens ?? 16, echo: g.echoPrompt ?? false }, start + i);
        } catch (err) {
          throw err instanceof RequestMemoryError ? new EngineSetupError(err.message) : err;
        }
      });
      const pad = this.options.padToSeqLen;
      const padTo = pad === undefined ? undefined : paddedPromptLength(Math.max(...prompts.map((p) => p.ids.length)), pad);
      const batches: (ForwardBatch & { startedAt: number })[] = [];
      const calledAt = Date.now() / 1000;
      // onBatch fires when a batch ends: its start is now less its duration (wall clock, as HELM's time.time()).
      const onBatch = (b: ForwardBatch) => batches.push({ ...b, startedAt: Date.now() / 1000 - b.seconds });
      let generated: Awaited<ReturnType<typeof generate>>;
      try {
        generated = await generate(this.engine, genRequests, { decode: this.decode, maxBatchSize: this.options.maxBatchSize, padTo, onBatch });
      } catch (err) {
        // A model that computes NaN/Inf: the message names it and what to check, in one line.
        if (err instanceof NonFiniteOutputError) throw new EngineSetupError(err.message);
        throw err;
      }
      const times = batchTimes(part.length, batches, calledAt);
      generated.forEach((g, i) => {
        const completions = g.completions.map((c) => this.toSequence(part[i]!, prompts[i]!, c));
        generatedTokens += g.completions.reduce((s, c) => s + c.tokens.length, 0);
        results.push(requestResult({ success: true, completions, cached: false, ...times[i] }));
      });
      onProgress?.({ done: results.length, total: requests.length, generatedTokens, cachedHits: 0 });
    }
    return results;
  }
}
