/** A version-1 numpy `.npy` file (test helper): header dict padded to 64 bytes, then the raw little-endian data. */
export function npyFile(descr: string, shape: number[], data: ArrayBufferView): Buffer {
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  header += `${' '.repeat(63 - ((header.length + 10) % 64))}\n`;
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, 0, 0]);
  pre.writeUInt16LE(header.length, 8);
  return Buffer.concat([pre, Buffer.from(header, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}
