import { type IncomingMessage, STATUS_CODES, type Server } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/** The HTTP layer's limits that its refusals name. */
export interface ProtocolLimits {
  maxHeaderBytes: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
}

/** The API server's defaults, shared by the results site and the loading placeholder (documented in SECURITY.md). */
export const DEFAULT_PROTOCOL_LIMITS: ProtocolLimits = { maxHeaderBytes: 16 * 1024, headersTimeoutMs: 10_000, bodyTimeoutMs: 30_000 };

/**
 * The refusals that happen below the routes, in OpenAI's error shape, for every server flexhelm starts (the API
 * server, the results site, the loading placeholder): without these Node answers a malformed request with a bare
 * `400` and no body, a header overflow with a bare `431`, and fastify a bad URL with its own `FST_ERR_BAD_URL` JSON.
 */
function protocolError(err: NodeJS.ErrnoException, limits: ProtocolLimits): ApiError {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError(408, `the request did not arrive in time: headers within ${limits.headersTimeoutMs} ms and the whole body within ${limits.bodyTimeoutMs} ms; send it faster or in one piece`, 'invalid_request_error', null, 'request_timeout');
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError(431, `the request line and headers are over ${limits.maxHeaderBytes} bytes (a long URL or query counts): send less in them`, 'invalid_request_error', null, 'headers_too_large');
  }
  return new ApiError(400, `malformed HTTP request: ${err.message}`, 'invalid_request_error', null, 'bad_request');
}

/** Node's `clientError` hook: answers on the raw socket (there is no response object yet) and closes it. */
export function clientErrorHandler(limits: ProtocolLimits): (err: NodeJS.ErrnoException, socket: Socket) => void {
  return (err, socket) => {
    if (err.code === 'ECONNRESET' || socket.destroyed) return;
    const e = protocolError(err, limits);
    const body = JSON.stringify(e.toJSON());
    if (socket.writable) {
      socket.write(`HTTP/1.1 ${e.status} ${STATUS_CODES[e.status]}\r\nContent-Type: ${JSON_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  };
}

/** fastify's router refusals (a URL that does not decode, a path segment over `maxParamLength`) in the one shape. */
export function frameworkErrors(err: Error, _req: FastifyRequest, reply: FastifyReply): void {
  const code = (err as { code?: string }).code;
  const e =
    code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new ApiError(414, 'a part of this URL is over 1000 characters: use shorter names', 'invalid_request_error', null, 'uri_too_long')
      : new ApiError(400, `the URL does not decode (a bad percent-encoding): ${err.message}`, 'invalid_request_error', null, 'bad_url');
  void reply.code(e.status).type(JSON_TYPE).send(e.toJSON());
}

/**
 * HTTP/1.1 requires a Host header. Node's own check answers an empty 400, so servers are created with
 * `requireHostHeader: false` and refuse here instead, in the one shape.
 */
export function missingHost(req: IncomingMessage): ApiError | undefined {
  if (req.httpVersion === '1.1' && req.headers.host === undefined) {
    return new ApiError(400, 'an HTTP/1.1 request needs a Host header', 'invalid_request_error', null, 'bad_request');
  }
  return undefined;
}

/** Wires `clientErrorHandler` into a plain Node server (fastify takes it as an option instead). */
export function answerClientErrors(server: Server, limits: ProtocolLimits): void {
  server.removeAllListeners('clientError');
  server.on('clientError', clientErrorHandler(limits));
}

/** A path as an error message shows it: a long one (a 5,000-character name) is cut, so the refusal stays small. */
export function shownPath(path: string): string {
  return path.length > 200 ? `${path.slice(0, 200)}… (${path.length} characters)` : path;
}
