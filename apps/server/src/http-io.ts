import { ApiError } from './api-error.js';

/** The content type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** 413 for a body over `limit`; `declared` is the Content-Length when the client sent one. */
export function bodyTooLarge(limit: number, declared?: number): ApiError {
  const size = declared !== undefined && Number.isFinite(declared) && declared > limit ? `${declared} bytes, above` : 'over';
  return new ApiError(413, `request body is ${size} this server's limit of ${limit} bytes; send fewer or shorter prompts`, 'invalid_request_error', null, 'body_too_large');
}

/** 415 unless `type` is application/json; a body without a type is read as JSON, as the server always has. */
export function checkJsonType(type: string | undefined): void {
  if (type && !/^application\/json\b/i.test(type)) {
    throw new ApiError(415, `content-type must be application/json, got ${type}`, 'invalid_request_error');
  }
}

/** A request body's JSON value; empty is 400, not JSON is 400 with the parser's reason. */
export function parseJsonText(text: string | undefined): unknown {
  if (text === undefined || text.trim() === '') throw new ApiError(400, 'the request body is empty: send a JSON object', 'invalid_request_error');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `the request body is not valid JSON: ${(err as Error).message}`, 'invalid_request_error');
  }
}

/**
 * `JSON.stringify(value)` in pieces: the array under `key` is written one element at a time, so a response with many
 * large choices is never one giant string (the socket's backpressure paces the generator).
 */
export function* jsonChunks(value: Record<string, unknown>, key: string): Generator<string> {
  let first = true;
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || typeof v === 'function') continue;
    const name = `${first ? '{' : ','}${JSON.stringify(k)}:`;
    first = false;
    if (k !== key || !Array.isArray(v)) {
      yield name + JSON.stringify(v);
      continue;
    }
    yield `${name}[`;
    for (let i = 0; i < v.length; i++) yield (i ? ',' : '') + (JSON.stringify(v[i]) ?? 'null');
    yield ']';
  }
  yield first ? '{}' : '}';
}

/** One server-sent event carrying `data` as JSON (and an `event:` line when named). */
export function sseEvent(data: unknown, event?: string): string {
  return `${event ? `event: ${event}\n` : ''}data: ${JSON.stringify(data)}\n\n`;
}
