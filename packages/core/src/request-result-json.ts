import { pyFloat, type PyJsonValue, type PyNumber, toNumber } from '@flexhelm/python-compat';
import type { RequestResult, Sequence, Token } from './request.js';
import type { ScenarioState } from './request-state.js';

/**
 * Python writes token and sequence logprobs, timings and top-logprob values as floats (`0.0`, not `0`), while
 * flexhelm keeps them as plain numbers for arithmetic. These converters box the float fields for writing
 * (`requestResultToPy`) and unbox them when reading back (`requestResultFromPy`), so a round trip is exact.
 */
export function requestResultToPy(result: RequestResult): PyJsonValue {
  const f = (x: number | undefined): PyNumber | undefined => (x === undefined ? undefined : pyFloat(x));
  return {
    success: result.success,
    embedding: result.embedding.map((x) => pyFloat(x)),
    completions: result.completions.map((s) => ({
      text: s.text,
      logprob: pyFloat(s.logprob),
      tokens: s.tokens.map((t) => ({
        text: t.text,
        logprob: pyFloat(t.logprob),
        top_logprobs: new Map([...t.top_logprobs].map(([k, v]) => [k, pyFloat(v)])),
      })),
      finish_reason: s.finish_reason,
    })),
    cached: result.cached,
    request_time: f(result.request_time),
    request_datetime: result.request_datetime,
    error: result.error,
    batch_size: result.batch_size,
    batch_request_time: f(result.batch_request_time),
  };
}

type PyMap = ReadonlyMap<string, PyJsonValue>;

function field<T>(m: PyMap, key: string, where: string, kind: 'string' | 'boolean' | 'number' | 'array' | 'map', optional = false): T {
  const v = m.get(key);
  if (v === undefined || v === null) {
    if (optional) return undefined as T;
    throw new TypeError(`${where}: missing "${key}"`);
  }
  const ok =
    kind === 'number' ? typeof v === 'number' || (typeof v === 'object' && v !== null && 'value' in v && typeof (v as { value: unknown }).value === 'number')
    : kind === 'array' ? Array.isArray(v)
    : kind === 'map' ? v instanceof Map
    : typeof v === kind;
  if (!ok) throw new TypeError(`${where}: "${key}" should be a ${kind}`);
  return (kind === 'number' ? toNumber(v as PyNumber) : v) as T;
}

/** Reads a RequestResult written by {@link requestResultToPy} (or by HELM) and parsed with `pyJsonParse`. */
export function requestResultFromPy(value: PyJsonValue, where = 'result'): RequestResult {
  if (!(value instanceof Map)) throw new TypeError(`${where}: expected an object`);
  const m = value as PyMap;
  const completions = field<PyJsonValue[]>(m, 'completions', where, 'array').map((c, i): Sequence => {
    const cw = `${where}.completions[${i}]`;
    if (!(c instanceof Map)) throw new TypeError(`${cw}: expected an object`);
    const tokens = field<PyJsonValue[]>(c, 'tokens', cw, 'array').map((t, j): Token => {
      const tw = `${cw}.tokens[${j}]`;
      if (!(t instanceof Map)) throw new TypeError(`${tw}: expected an object`);
      const top = field<PyMap>(t, 'top_logprobs', tw, 'map');
      return {
        text: field<string>(t, 'text', tw, 'string'),
        logprob: field<number>(t, 'logprob', tw, 'number'),
        top_logprobs: new Map([...top].map(([k, v]) => [k, toNumber(v as PyNumber)])),
      };
    });
    const finish = c.get('finish_reason');
    return {
      text: field<string>(c, 'text', cw, 'string'),
      logprob: field<number>(c, 'logprob', cw, 'number'),
      tokens,
      finish_reason: finish instanceof Map ? (Object.fromEntries(finish) as Record<string, string>) : undefined,
    };
  });
  return {
    success: field<boolean>(m, 'success', where, 'boolean'),
    embedding: (field<PyJsonValue[]>(m, 'embedding', where, 'array', true) ?? []).map((x) => toNumber(x as PyNumber)),
    completions,
    cached: field<boolean>(m, 'cached', where, 'boolean', true) ?? false,
    request_time: field<number>(m, 'request_time', where, 'number', true),
    request_datetime: field<number>(m, 'request_datetime', where, 'number', true),
    error: field<string>(m, 'error', where, 'string', true),
    batch_size: field<number>(m, 'batch_size', where, 'number', true),
    batch_request_time: field<number>(m, 'batch_request_time', where, 'number', true),
  };
}

/** A ScenarioState ready for `helmJson`: results' float fields boxed as Python writes them. */
export function scenarioStateToPy(state: ScenarioState): PyJsonValue {
  return {
    adapter_spec: state.adapter_spec as unknown as PyJsonValue,
    request_states: state.request_states.map((rs) => ({
      ...(rs as unknown as Record<string, PyJsonValue>),
      result: rs.result === undefined ? undefined : requestResultToPy(rs.result),
    })),
  };
}
