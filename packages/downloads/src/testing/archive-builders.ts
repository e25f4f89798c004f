import { deflateRawSync, gzipSync } from 'node:zlib';
import { crc32 } from '../crc32.js';

/** Archive contents for the builders: relative path → file content (a path ending in `/` is a folder). */
export type ArchiveEntries = Readonly<Record<string, string | Uint8Array>>;

const BLOCK = 512;

/** A ustar tar archive of `entries` (gzip-compressed with `gzip: true`), built in memory for tests and fixtures. */
export function tarArchive(entries: ArchiveEntries, options: { gzip?: boolean } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const [name, content] of Object.entries(entries)) {
    const isDir = name.endsWith('/');
    const data = isDir ? Buffer.alloc(0) : toBuffer(content);
    parts.push(tarHeader(name, data.length, isDir));
    parts.push(data, Buffer.alloc((BLOCK - (data.length % BLOCK)) % BLOCK));
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  const tar = Buffer.concat(parts);
  return options.gzip ? gzipSync(tar) : tar;
}

function tarHeader(name: string, size: number, isDir: boolean): Buffer {
  let prefix = '';
  let base = name;
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf('/', name.length - 2);
    prefix = name.slice(0, cut);
    base = name.slice(cut + 1);
    if (cut < 0 || Buffer.byteLength(base) > 100 || Buffer.byteLength(prefix) > 155) throw new Error(`tar entry name too long for ustar: ${name}`);
  }
  const header = Buffer.alloc(BLOCK);
  const put = (text: string, offset: number, length: number) => header.write(text, offset, length, 'utf8');
  const octal = (value: number, length: number) => value.toString(8).padStart(length - 1, '0');
  put(base, 0, 100);
  put(`${octal(isDir ? 0o755 : 0o644, 8)}\0`, 100, 8);
  put(`${octal(0, 8)}\0`, 108, 8);
  put(`${octal(0, 8)}\0`, 116, 8);
  put(`${octal(size, 12)}\0`, 124, 12);
  put(`${octal(1_700_000_000, 12)}\0`, 136, 12);
  put('        ', 148, 8);
  put(isDir ? '5' : '0', 156, 1);
  put('ustar\0', 257, 6);
  put('00', 263, 2);
  put(prefix, 345, 155);
  let sum = 0;
  for (const byte of header) sum += byte;
  put(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8);
  return header;
}

/** A zip archive of `entries` (deflated), built in memory for tests and fixtures. */
export function zipArchive(entries: ArchiveEntries): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const [name, content] of Object.entries(entries)) {
    const isDir = name.endsWith('/');
    const data = isDir ? Buffer.alloc(0) : toBuffer(content);
    const compressed = isDir ? data : deflateRawSync(data);
    const nameBytes = Buffer.from(name, 'utf8');
    const crc = crc32(data);
    const method = isDir ? 0 : 8;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(method, 8);
    local.writeUInt16LE(0, 10);
    local.writeUInt16LE(0x21, 12); // 1980-01-01
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(compressed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(0x031e, 4); // made by: unix, 3.0
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(method, 10);
    central.writeUInt16LE(0, 12);
    central.writeUInt16LE(0x21, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(compressed.length, 20);
    central.writeUInt32LE(data.length, 24);
    central.writeUInt16LE(nameBytes.length, 28);
    central.writeUInt32LE(((isDir ? 0o40755 : 0o100644) << 16) >>> 0, 38);
    central.writeUInt32LE(offset, 42);
    locals.push(local, nameBytes, compressed);
    centrals.push(central, nameBytes);
    offset += local.length + nameBytes.length + compressed.length;
  }
  const centralDir = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(centrals.length / 2, 8);
  end.writeUInt16LE(centrals.length / 2, 10);
  end.writeUInt32LE(centralDir.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, centralDir, end]);
}

/** A Zstandard frame holding `content` in raw (stored) blocks: valid zstd without needing a compressor. */
export function zstdFrame(content: string | Uint8Array): Buffer {
  const data = toBuffer(content);
  const maxBlock = 128 * 1024;
  const head = Buffer.alloc(9);
  head.writeUInt32LE(0xfd2fb528, 0);
  head[4] = 0xa0; // single segment, 4-byte frame content size, no checksum
  head.writeUInt32LE(data.length, 5);
  const parts: Buffer[] = [head];
  let pos = 0;
  do {
    const size = Math.min(maxBlock, data.length - pos);
    const last = pos + size >= data.length ? 1 : 0;
    const blockHeader = Buffer.alloc(3);
    blockHeader.writeUIntLE((size << 3) | last, 0, 3); // block type 0 = raw
    parts.push(blockHeader, data.subarray(pos, pos + size));
    pos += size;
  } while (pos < data.length);
  return Buffer.concat(parts);
}

function toBuffer(content: string | Uint8Array): Buffer {
  return typeof content === 'string' ? Buffer.from(content, 'utf8') : Buffer.from(content);
}
