import { createReadStream } from 'node:fs';

/**
 * Python's `for line in open(path)` on a UTF-8 system, streamed: strict UTF-8, universal newlines (`\r\n` and a lone
 * `\r` become `\n`), each line with its `\n` (the last without one when the file does not end in a newline). For files
 * too large to read as one string (V8 caps strings at ~512 M characters).
 */
export async function* pythonTextLines(path: string): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
  let pending = '';
  let pendingCr = false;
  const split = function* (text: string, final: boolean): Generator<string> {
    let chunk = (pendingCr ? '\r' : '') + text;
    pendingCr = false;
    // A trailing \r may be the first half of \r\n: decide on the next chunk.
    if (!final && chunk.endsWith('\r')) {
      chunk = chunk.slice(0, -1);
      pendingCr = true;
    }
    chunk = pending + chunk.replace(/\r\n?/g, '\n');
    let start = 0;
    for (let i = chunk.indexOf('\n'); i >= 0; i = chunk.indexOf('\n', start)) {
      yield chunk.slice(start, i + 1);
      start = i + 1;
    }
    pending = chunk.slice(start);
  };
  try {
    for await (const bytes of createReadStream(path)) yield* split(decoder.decode(bytes as Buffer, { stream: true }), false);
    yield* split(decoder.decode(), true);
  } catch (error) {
    if (error instanceof TypeError && /decode|encoded/i.test(error.message)) {
      throw new Error(`${path} is not valid UTF-8 (${error.message}); the download may be damaged: delete it and run again.`);
    }
    throw error;
  }
  if (pending !== '') yield pending;
}
