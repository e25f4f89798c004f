import { pyJsonParse } from '@flexhelm/python-compat';
import { requestResultFromPy, type RequestResult, type Sequence } from '@flexhelm/core';

/**
 * The result store's text form of a RequestResult: plain JSON (tokens as `[text, logprob, [top text, logprob, …]]`),
 * which the coordinator decodes with the native `JSON.parse` — several times faster than the Python-exact parser
 * the request cache needs, and it reads every result of a run. Every number is a float or an int HELM writes from a
 * known field, so nothing of Python's int/float distinction has to survive here; JSON's missing NaN, ±Infinity and
 * -0 are written as strings.
 */
type Num = number | string;
type EncodedToken = [string, Num, (string | Num)[]];
interface EncodedSequence {
  text: string;
  logprob: Num;
  tokens: EncodedToken[];
  finish_reason?: Record<string, string>;
}
interface EncodedResult {
  v: 2;
  success: boolean;
  embedding: Num[];
  completions: EncodedSequence[];
  cached: boolean;
  request_time?: Num;
  request_datetime?: Num;
  error?: string;
  batch_size?: Num;
  batch_request_time?: Num;
}

const num = (x: number): Num => (Object.is(x, -0) ? '-0' : Number.isFinite(x) ? x : String(x));
const optNum = (x: number | undefined): Num | undefined => (x === undefined ? undefined : num(x));
const unnum = (x: Num): number => (typeof x === 'number' ? x : Number(x));
const optUnnum = (x: Num | undefined): number | undefined => (x === undefined ? undefined : unnum(x));

export function resultToStoreJson(r: RequestResult): string {
  const encoded: EncodedResult = {
    v: 2,
    success: r.success,
    embedding: r.embedding.map(num),
    completions: r.completions.map((s) => ({
      text: s.text,
      logprob: num(s.logprob),
      tokens: s.tokens.map((t): EncodedToken => [t.text, num(t.logprob), [...t.top_logprobs].flatMap(([k, v]) => [k, num(v)])]),
      finish_reason: s.finish_reason,
    })),
    cached: r.cached,
    request_time: optNum(r.request_time),
    request_datetime: optNum(r.request_datetime),
    error: r.error,
    batch_size: optNum(r.batch_size),
    batch_request_time: optNum(r.batch_request_time),
  };
  return JSON.stringify(encoded);
}

/** Reads `resultToStoreJson`'s form, and the Python-JSON form earlier flexhelm versions stored. */
export function resultFromStoreJson(text: string, where: string): RequestResult {
  if (!text.startsWith('{"v":2,')) return requestResultFromPy(pyJsonParse(text), where);
  const e = JSON.parse(text) as EncodedResult;
  return {
    success: e.success,
    embedding: e.embedding.map(unnum),
    completions: e.completions.map(
      (s): Sequence => ({
        text: s.text,
        logprob: unnum(s.logprob),
        tokens: s.tokens.map(([text, logprob, top]) => {
          const map = new Map<string, number>();
          for (let i = 0; i < top.length; i += 2) map.set(top[i] as string, unnum(top[i + 1]!)); // encoded as (text, logprob) pairs
          return { text, logprob: unnum(logprob), top_logprobs: map };
        }),
        finish_reason: s.finish_reason,
      }),
    ),
    cached: e.cached,
    request_time: optUnnum(e.request_time),
    request_datetime: optUnnum(e.request_datetime),
    error: e.error,
    batch_size: optUnnum(e.batch_size),
    batch_request_time: optUnnum(e.batch_request_time),
  };
}
