import Fastify, { type FastifyInstance } from 'fastify';
import { checkJsonType } from './http-io.js';
import { clientErrorHandler, frameworkErrors } from './protocol-errors.js';

/** The API server's HTTP limits, defaults applied. */
export interface ApiHttpLimits {
  maxBodyBytes: number;
  maxHeaderBytes: number;
  /** At most `bodyTimeoutMs` (Node refuses a headers timeout longer than the whole-request timeout). */
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  keepAliveTimeoutMs: number;
  maxConnections: number;
}

/** The API server's fastify instance: its HTTP limits and timeouts, half-open connections, and one body parser. */
export function createApiApp(limits: ApiHttpLimits): FastifyInstance {
  const { maxBodyBytes, maxHeaderBytes, headersTimeoutMs, bodyTimeoutMs } = limits;
  // Limits and timeouts are the framework's configuration: Node answers a request whose headers or body do not arrive
  // in time with 408 (checked every `connectionsCheckingInterval`); the timeouts end once the request is received, so
  // long generations and event streams are never cut.
  const app = Fastify({
    bodyLimit: maxBodyBytes,
    requestTimeout: bodyTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: 0,
    http: {
      maxHeaderSize: maxHeaderBytes,
      headersTimeout: headersTimeoutMs,
      requestTimeout: bodyTimeoutMs,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(headersTimeoutMs / 4))),
      requireHostHeader: false, // refused in onRequest, in OpenAI's shape (Node's own 400 has no body)
    },
    return503OnClosing: false,
    exposeHeadRoutes: false,
    frameworkErrors,
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1000 },
    clientErrorHandler: clientErrorHandler({ maxHeaderBytes, headersTimeoutMs, bodyTimeoutMs }),
  });
  app.server.maxConnections = limits.maxConnections;
  // A client that half-closes after sending its request (`printf … | nc`, some proxies: shutdown(SHUT_WR)) still reads
  // the answer: Node would otherwise treat end of input as an abort and end the connection unanswered. The connection
  // closes once the answer is written. (A documented field of Node's HTTP server, not in its option types.)
  (app.server as typeof app.server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;

  // One parser for every body: the type is checked here so a wrong one is 415 in OpenAI's shape, and the text is
  // parsed in the route so an empty or broken body is a 400 saying so.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    try {
      checkJsonType(req.headers['content-type']);
      done(null, body);
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  return app;
}
