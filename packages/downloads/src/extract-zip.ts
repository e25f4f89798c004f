import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { crc32 } from './crc32.js';

/**
 * Extracts every entry of a zip file into `destDir`. yauzl rejects absolute and `..` paths and checks entry sizes;
 * CRC-32s are checked here because yauzl does not.
 */
export async function extractZip(zipPath: string, destDir: string): Promise<void> {
  const zip = await new Promise<yauzl.ZipFile>((resolve, reject) => {
    yauzl.open(zipPath, { lazyEntries: true, autoClose: true, validateEntrySizes: true, decodeStrings: true }, (error, file) => {
      if (error || !file) reject(error ?? new Error('could not open the zip file'));
      else resolve(file);
    });
  });
  try {
    await new Promise<void>((resolve, reject) => {
      zip.on('error', reject);
      zip.on('end', resolve);
      zip.on('entry', (entry: yauzl.Entry) => {
        writeEntry(zip, entry, destDir).then(
          () => zip.readEntry(),
          (error: unknown) => reject(error),
        );
      });
      zip.readEntry();
    });
  } finally {
    if (zip.isOpen) zip.close();
  }
}

async function writeEntry(zip: yauzl.ZipFile, entry: yauzl.Entry, destDir: string): Promise<void> {
  const path = join(destDir, entry.fileName);
  if (entry.fileName.endsWith('/')) {
    await mkdir(path, { recursive: true });
    return;
  }
  if (entry.isEncrypted()) throw new Error(`zip entry ${entry.fileName} is encrypted, which is not supported`);
  await mkdir(dirname(path), { recursive: true });
  const stream = await new Promise<Readable>((resolve, reject) => {
    zip.openReadStream(entry, (error, readable) => {
      if (error || !readable) reject(error ?? new Error(`could not read zip entry ${entry.fileName}`));
      else resolve(readable);
    });
  });
  let crc = 0;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      crc = crc32(chunk, crc);
      callback(null, chunk);
    },
    flush(callback) {
      callback(crc === entry.crc32 >>> 0 ? null : new Error(`zip entry ${entry.fileName} is corrupt (CRC-32 mismatch)`));
    },
  });
  await pipeline(stream, check, createWriteStream(path));
}
