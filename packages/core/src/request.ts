import { PyFloat, type PyNumber } from '@flexhelm/python-compat';

/** HELM 0.2.1 `Request` (field order = JSON order). */
export interface Request {
  model: string;
  embedding: boolean;
  prompt: string;
  /** Float 1.0 by default; adapters copy the adapter spec's value (int `0` for MC/LM requests). */
  temperature: PyNumber;
  num_completions: number;
  top_k_per_token: number;
  max_tokens: number;
  stop_sequences: string[];
  echo_prompt: boolean;
  top_p: PyNumber;
  presence_penalty: PyNumber;
  frequency_penalty: PyNumber;
  random?: string;
}

export function request(fields: Partial<Request> = {}): Request {
  return {
    model: fields.model ?? 'openai/text-davinci-002',
    embedding: fields.embedding ?? false,
    prompt: fields.prompt ?? '',
    temperature: fields.temperature ?? new PyFloat(1),
    num_completions: fields.num_completions ?? 1,
    top_k_per_token: fields.top_k_per_token ?? 1,
    max_tokens: fields.max_tokens ?? 100,
    stop_sequences: fields.stop_sequences ?? [],
    echo_prompt: fields.echo_prompt ?? false,
    top_p: fields.top_p ?? 1,
    presence_penalty: fields.presence_penalty ?? 0,
    frequency_penalty: fields.frequency_penalty ?? 0,
    random: fields.random,
  };
}

/** `Token{text, logprob, top_logprobs}`; `top_logprobs` is a plain dict whose key order matters, hence a Map. */
export interface Token {
  text: string;
  logprob: number;
  top_logprobs: Map<string, number>;
}

/** `Sequence{text, logprob, tokens, finish_reason=None}` (finish_reason like `{"reason": "stop"}`). */
export interface Sequence {
  text: string;
  logprob: number;
  tokens: Token[];
  finish_reason?: Record<string, string>;
}

/** HELM 0.2.1 `RequestResult`. */
export interface RequestResult {
  success: boolean;
  embedding: number[];
  completions: Sequence[];
  cached: boolean;
  request_time?: number;
  request_datetime?: number;
  error?: string;
  batch_size?: number;
  batch_request_time?: number;
}

export function requestResult(fields: Partial<RequestResult> & Pick<RequestResult, 'success' | 'completions'>): RequestResult {
  return {
    success: fields.success,
    embedding: fields.embedding ?? [],
    completions: fields.completions,
    cached: fields.cached ?? false,
    request_time: fields.request_time,
    request_datetime: fields.request_datetime,
    error: fields.error,
    batch_size: fields.batch_size,
    batch_request_time: fields.batch_request_time,
  };
}
