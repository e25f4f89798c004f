import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** Delays between the first half-close probes (ms); then one a second. */
const HALF_CLOSE_PROBES_MS = [0, 10, 100];

/**
 * End of input is not a disconnect, but a client that closed its socket entirely sends the same FIN. After a FIN the
 * request is probed: an interim `102 Processing` while the answer has not started (HTTP/1.1 clients must accept and
 * skip it), a comment line in an event stream under way. A half-closed client reads it; a gone one answers with a
 * reset that fails the next probe (at once, then 10 and 100 ms later, then each second) or write, which closes the
 * connection and so cancels the request as any disconnect does. A FIN once an event stream has started is a
 * disconnect (cancelled at once, as before).
 */
export function watchHalfClose(req: FastifyRequest, reply: FastifyReply, eventStreams: WeakSet<ServerResponse>): void {
  const socket = req.raw.socket;
  if (req.raw.httpVersion !== '1.1') return; // 1xx answers are not for HTTP/1.0 clients
  // The first probe at once, the next ones soon after (a gone client's reset has arrived by then, on loopback within
  // the first 10 ms, and that write fails), then one a second for as long as the answer runs.
  let timer: NodeJS.Timeout | undefined;
  const probe = (step = 0) => {
    const res = reply.raw;
    if (res.writableEnded || socket.destroyed) return;
    if (!res.headersSent) res.writeProcessing();
    // An event stream under way: a comment line, which event-stream clients skip, does the same between tokens.
    else if (eventStreams.has(res)) res.write(':\n\n');
    else return; // a plain answer already being written fails by itself if the client is gone
    timer = setTimeout(() => probe(step + 1), HALF_CLOSE_PROBES_MS[step] ?? 1_000);
    timer.unref();
  };
  reply.raw.once('close', () => clearTimeout(timer));
  const onEnd = () => {
    // A FIN in the middle of an event stream comes from a client that left (half-closing clients do it right after
    // their request): cancel at once, as before, rather than a write or two later.
    if (reply.raw.headersSent && eventStreams.has(reply.raw)) socket.destroy();
    else probe();
  };
  if (socket.readableEnded) onEnd();
  else {
    socket.once('end', onEnd);
    reply.raw.once('close', () => socket.off('end', onEnd)); // keep-alive sockets carry many requests
  }
}
