import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from './api-error.js';

/** Sends `value` as JSON with `status`. */
export function sendJson(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** Reads a JSON body of at most `limit` bytes; too large is 413, not JSON is 400. */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    throw new ApiError(413, `request body is ${declared} bytes, above this server's limit of ${limit} bytes; send fewer or shorter prompts`, 'invalid_request_error', null, 'body_too_large');
  }
  const type = req.headers['content-type'] ?? '';
  if (type && !/^application\/json\b/i.test(type)) {
    throw new ApiError(415, `content-type must be application/json, got ${type}`, 'invalid_request_error');
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      throw new ApiError(413, `request body is over this server's limit of ${limit} bytes; send fewer or shorter prompts`, 'invalid_request_error', null, 'body_too_large');
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new ApiError(400, 'the request body is empty: send a JSON object', 'invalid_request_error');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `the request body is not valid JSON: ${(err as Error).message}`, 'invalid_request_error');
  }
}
