import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';
import type { Usage } from './completion-service.js';
import { sseEvent } from './http-io.js';
import { pathOf } from './request-path.js';
import type { RequestState } from './request-state.js';

/** What a token stream needs besides its request. */
export interface EventStreamContext {
  state: RequestState;
  /** Rows per engine batch: one engine step's burst of events scales with it. */
  maxBatchSize: number;
  /** Bytes a client may leave unread beyond one step's burst before it is dropped. */
  maxStreamBufferBytes: number;
  log: (message: string) => void;
}

/**
 * OpenAI's server-sent events: each chunk as a `data:` event, then `[DONE]`; an error mid-stream as a last event.
 * Chunks are written as the engine makes them, never waiting for the client: the engine's batch is shared, so pausing
 * it for one slow reader would stall every other request in it. A client that leaves more than
 * `maxStreamBufferBytes` unread beyond one engine step's burst is dropped instead: one log line, the stream closed,
 * its rows cancelled at the engine's next step.
 */
export async function sendEventStream(ctx: EventStreamContext, req: FastifyRequest, reply: FastifyReply, stream: AsyncIterable<object>, signal: AbortSignal): Promise<void> {
  const { state, maxBatchSize, maxStreamBufferBytes, log } = ctx;
  const chunks = stream[Symbol.asyncIterator]();
  // Errors before the first chunk (a bad model name, a prompt over the window) are still a plain 4xx.
  let next = await chunks.next();
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  state.eventStreams.add(res);
  // One engine step sends at most three events per row of its batch (echoed prompt, token, finish), all at once: a
  // burst a reading client cannot have taken yet (echoed prompts with top logprobs make large ones).
  let burst = 0;
  try {
    for (; !next.done; next = await chunks.next()) {
      if (res.destroyed) return;
      const chunk = next.value as { usage?: Usage; choices?: unknown[] };
      if (chunk.usage) {
        state.usage.set(req, chunk.usage);
        if (!state.wantsUsage.has(req)) continue; // asked for the access log only
      }
      const event = sseEvent(next.value);
      burst = Math.max(burst, 3 * maxBatchSize * Buffer.byteLength(event));
      res.write(event);
      if (res.writableLength - burst > maxStreamBufferBytes) {
        log(`client is not reading its event stream: ${res.writableLength} bytes unsent, over --max-stream-buffer ${maxStreamBufferBytes}; closed it and cancelled its rows: ${req.method} ${pathOf(req)}`);
        state.abandoned.add(req);
        res.destroy();
        return;
      }
    }
    res.write('data: [DONE]\n\n');
  } catch (err) {
    if (signal.aborted) log(`client closed the connection: ${req.method} ${pathOf(req)} (${(err as Error).message})`);
    else {
      log(`event stream failed on ${req.method} ${req.url}: ${(err as Error).stack ?? String(err)}`);
      const e = err instanceof ApiError ? err : new ApiError(500, `internal error: ${(err as Error).message}`, 'server_error');
      res.write(sseEvent(e.toJSON()));
    }
  } finally {
    res.end();
    // Leaving early (a dropped client) ends the generator, which cancels its rows.
    await chunks.return?.();
  }
}
