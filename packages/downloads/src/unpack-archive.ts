import { createReadStream, createWriteStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { Decompress } from 'fzstd';
import { extract as extractTar } from 'tar';
import type { ArchiveFormat } from './archive-format.js';
import { extractZip } from './extract-zip.js';

export interface UnpackOptions {
  /** File name for the output of single-file formats (`gz`, `zst`). */
  outputName: string;
  /** Bytes of the archive read so far, for progress bars. */
  onProgress?: (bytesRead: number, bytesTotal: number) => void;
}

/**
 * Unpacks `archivePath` into the existing, empty folder `destDir`, checking integrity on the way (gzip and zip CRCs,
 * tar headers, zstd frames). Throws on a corrupt or truncated archive, and on an archive with nothing in it.
 */
export async function unpackArchive(archivePath: string, format: ArchiveFormat, destDir: string, options: UnpackOptions): Promise<void> {
  const total = (await stat(archivePath)).size;
  const source = () => {
    const stream = createReadStream(archivePath);
    let read = 0;
    stream.on('data', (chunk) => {
      read += chunk.length;
      options.onProgress?.(read, total);
    });
    return stream;
  };
  switch (format) {
    case 'tar':
    case 'tar.gz':
    case 'tgz':
      // node-tar recognises gzip by its magic bytes; `strict` turns bad headers and truncation into errors, and it
      // refuses absolute paths and `..` entries. Its zip-bomb guard (1000:1) is lifted: highly compressible data such as
      // sparse or repetitive files is legitimate, and the sources are URLs the project chose.
      await pipeline(source(), extractTar({ cwd: destDir, strict: true, preserveOwner: false, maxDecompressionRatio: Number.POSITIVE_INFINITY }));
      break;
    case 'zip':
      await extractZip(archivePath, destDir);
      options.onProgress?.(total, total);
      break;
    case 'gz':
      await pipeline(source(), createGunzip(), createWriteStream(join(destDir, options.outputName)));
      break;
    case 'zst':
      await pipeline(source(), zstdDecompressor(), createWriteStream(join(destDir, options.outputName)));
      break;
  }
  if ((await readdir(destDir)).length === 0) throw new Error('the archive contains no files');
}

function zstdDecompressor(): Transform {
  let finished = false;
  const transform = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        decompressor.push(chunk);
        callback();
      } catch (error) {
        callback(error as Error);
      }
    },
    flush(callback) {
      try {
        decompressor.push(new Uint8Array(0), true);
        callback(finished ? null : new Error('zstd stream ended before its last frame was complete'));
      } catch (error) {
        callback(error as Error);
      }
    },
  });
  const decompressor = new Decompress((data, final) => {
    if (data.length) transform.push(Buffer.from(data.buffer, data.byteOffset, data.length));
    if (final) finished = true;
  });
  return transform;
}
