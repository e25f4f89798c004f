import { mkdirSync, rmSync } from 'node:fs';
import { allocPinned, readFile, writeFile } from '@flexhelm/pinned-memory';

/**
 * One tensor stream of a cache segment, token-major like FlexLLMGen's `(tokens, batch·heads, headDim)` cache: K or V
 * (f16), or their 4-bit codes or scales. A decode step appends one token's bytes.
 */
export interface CacheStream {
  bytesPerToken: number;
  /** RAM home (host tier, or the compute tier with compression), capacity grown in chunks of tokens. */
  host?: Uint8Array;
  /** Disk home: one file per stream, appended in place. */
  file?: string;
}

const GROW_TOKENS = 64;
const ALIGN = 4096;
const alignUp = (n: number) => Math.ceil(n / ALIGN) * ALIGN;

/**
 * The bytes of a KV cache's streams in RAM or on disk: appends (O_DIRECT on disk, grown in chunks in RAM) and reads of
 * the first `tokens` of a segment's streams (disk reads land in reused page-aligned staging buffers). Knows nothing of
 * what the bytes mean.
 */
export class CacheStreamIo {
  private dirMade = false;
  private readonly staging: ArrayBuffer[] = [];

  constructor(
    private readonly dir: string | undefined,
    private readonly direct: boolean,
    private readonly stats: { cacheDiskBytesRead: number; cacheDiskBytesWritten: number },
  ) {}

  /** The first `tokens` tokens of each stream, handed to `use` (views valid only until it settles). */
  async read(streams: CacheStream[], onDisk: boolean, tokens: number, use: (parts: Uint8Array[]) => Promise<void>): Promise<void> {
    if (!onDisk) return use(streams.map((st) => st.host!.subarray(0, st.bytesPerToken * tokens)));
    const offsets: number[] = [];
    let total = 0;
    for (const st of streams) {
      offsets.push(total);
      total = alignUp(total + st.bytesPerToken * tokens);
    }
    const buffer = await this.acquireStaging(total);
    try {
      const parts = streams.map((st, i) => new Uint8Array(buffer, offsets[i]!, st.bytesPerToken * tokens));
      await Promise.all(streams.map((st, i) => readFile(st.file!, parts[i]!, { direct: this.direct })));
      this.stats.cacheDiskBytesRead += parts.reduce((a, p) => a + p.byteLength, 0);
      await use(parts);
    } finally {
      this.staging.push(buffer);
    }
  }

  /** Writes `bytes` at token `tokens` of the stream. */
  async append(st: CacheStream, tokens: number, bytes: Uint8Array): Promise<void> {
    const at = tokens * st.bytesPerToken;
    if (st.file) {
      if (!this.dirMade) {
        mkdirSync(this.dir!, { recursive: true });
        this.dirMade = true;
      }
      await writeFile(st.file, bytes, { offset: at, direct: this.direct });
      this.stats.cacheDiskBytesWritten += bytes.byteLength;
      return;
    }
    const need = at + bytes.byteLength;
    if (!st.host || st.host.byteLength < need) {
      const grown = new Uint8Array(need + GROW_TOKENS * st.bytesPerToken);
      if (st.host) grown.set(st.host.subarray(0, at));
      st.host = grown;
    }
    st.host.set(bytes, at);
  }

  /** Drops the staging buffers and deletes the files. */
  close(): void {
    this.staging.length = 0;
    if (this.dirMade) rmSync(this.dir!, { recursive: true, force: true });
  }

  /** A page-aligned staging buffer of at least `bytes` (reused between reads; a free one too small is dropped). */
  private async acquireStaging(bytes: number): Promise<ArrayBuffer> {
    const i = this.staging.findIndex((b) => b.byteLength >= bytes);
    if (i >= 0) return this.staging.splice(i, 1)[0]!;
    if (this.staging.length > 0) this.staging.shift();
    // Room for the next GROW_TOKENS-ish appends, so a decode loop does not allocate every step.
    return allocPinned(alignUp(bytes + (bytes >> 3)));
  }
}
