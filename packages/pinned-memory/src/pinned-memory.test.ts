import { mkdtemp, mkdir, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { closeSync, constants, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { jsBackend } from './js-backend.js';
import { loadNativeBinding, nativeBackend } from './native-backend.js';
import { createPinnedMemory, type PinnedMemory } from './pinned-memory.js';
import { PinnedIoError } from './pinned-io-error.js';
import { randomBytes } from './test-random.js';

const binding = loadNativeBinding();
const implementations: Array<[string, PinnedMemory]> = [['js', createPinnedMemory(jsBackend, { ioUring: false })]];
if (binding) implementations.push(['native', createPinnedMemory(nativeBackend(binding), { ioUring: binding.features.ioUring })]);

function hasIpcLockCapability(): boolean {
  const status = readFileSync('/proc/self/status', 'utf8');
  const effective = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return effective !== undefined && (BigInt(`0x${effective}`) & (1n << 14n)) !== 0n; // CAP_IPC_LOCK = 14
}

let dir: string;
let directSupported = false;
beforeAll(async () => {
  // Under the package, not /tmp: /tmp may be tmpfs, which refuses O_DIRECT and would hide the direct code paths.
  await mkdir(join(import.meta.dirname, '..', '.test-tmp'), { recursive: true });
  dir = await mkdtemp(join(import.meta.dirname, '..', '.test-tmp', 'io-'));
  // Whether this filesystem accepts O_DIRECT (overlayfs on old kernels and tmpfs do not; the addon then falls back).
  const probe = join(dir, 'probe');
  await writeFile(probe, 'x');
  try {
    closeSync(openSync(probe, constants.O_RDONLY | constants.O_DIRECT));
    directSupported = true;
  } catch {
    directSupported = false;
  }
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.each(implementations)('%s implementation', (name, api) => {
  describe('allocPinned', () => {
    it('returns zeroed, writable memory of exactly the requested size', async () => {
      for (const size of [0, 1, 4095, 4096, 100_003]) {
        const buffer = await api.allocPinned(size);
        expect(buffer.byteLength).toBe(size);
        const bytes = new Uint8Array(buffer);
        expect(bytes.every((b) => b === 0)).toBe(true);
        bytes.fill(7);
        expect(bytes[size - 1]).toBe(size ? 7 : undefined);
      }
    });

    it(`${name === 'native' ? 'locks' : 'cannot lock'} the memory (isPinned)`, async () => {
      const buffer = await api.allocPinned(1 << 16);
      // With CAP_IPC_LOCK mlock always succeeds; without it, it may hit RLIMIT_MEMLOCK (then a warning was emitted).
      const canLock = hasIpcLockCapability();
      if (name === 'js') expect(api.isPinned(buffer)).toBe(false);
      else if (canLock) expect(api.isPinned(buffer)).toBe(true);
      expect(api.isPinned(new ArrayBuffer(8))).toBe(false);
    });

    it('rejects a negative or fractional size', async () => {
      await expect(api.allocPinned(-1)).rejects.toThrow(/bytes is -1; pass a non-negative integer/);
      await expect(api.allocPinned(1.5)).rejects.toThrow(RangeError);
    });
  });

  describe('copy', () => {
    it('copies unaligned sizes and views, into larger destinations, with 1..3 threads', async () => {
      for (const size of [0, 1, 7, 4097, (1 << 20) + 3, (9 << 20) + 5]) {
        const source = randomBytes(size + 3, size);
        const src = source.subarray(3);
        for (const threads of [1, 2, 3]) {
          const dst = new Uint8Array(size + 10);
          await api.copy(dst.subarray(1), src, { threads });
          expect(dst[0]).toBe(0);
          expect(Buffer.from(dst.subarray(1, size + 1)).equals(Buffer.from(src))).toBe(true);
          expect(dst.subarray(size + 1).every((b) => b === 0)).toBe(true);
        }
      }
    });

    it('copies between pinned buffers and accepts ArrayBuffer, DataView and Float32Array', async () => {
      const pinned = await api.allocPinned(4096 * 3);
      const data = randomBytes(4096 * 3, 1);
      await api.copy(pinned, new DataView(data.buffer));
      expect(Buffer.from(pinned).equals(Buffer.from(data))).toBe(true);
      const floats = new Float32Array(3072);
      await api.copy(floats, pinned, { threads: 2 });
      expect(Buffer.from(floats.buffer).equals(Buffer.from(data))).toBe(true);
    });

    it('copies between SharedArrayBuffer-backed views', async () => {
      const shared = new Uint8Array(new SharedArrayBuffer(10_000));
      const data = randomBytes(9_000, 12);
      await api.copy(shared.subarray(1000), data, { threads: 2 });
      expect(Buffer.from(shared.subarray(1000)).equals(Buffer.from(data))).toBe(true);
      const back = new Uint8Array(9_000);
      await api.copy(back, shared.subarray(1000));
      expect(Buffer.from(back).equals(Buffer.from(data))).toBe(true);
    });

    it('handles overlapping views of one buffer like memmove', async () => {
      const size = 1 << 20;
      for (const shift of [1, -1, 4096, -12345]) {
        const bytes = randomBytes(size + Math.abs(shift), 9);
        const expected = Uint8Array.from(bytes);
        const from = shift > 0 ? 0 : -shift;
        const to = Math.max(shift, 0);
        expected.copyWithin(to, from, from + size);
        await api.copy(bytes.subarray(to, to + size), bytes.subarray(from, from + size), { threads: 2 });
        expect(Buffer.from(bytes).equals(Buffer.from(expected))).toBe(true);
      }
    });

    it('rejects a destination smaller than the source, and non-buffers', async () => {
      await expect(api.copy(new Uint8Array(3), new Uint8Array(4))).rejects.toThrow(/dst has 3 bytes but src has 4/);
      await expect(api.copy([1, 2] as never, new Uint8Array(1))).rejects.toThrow(/dst must be an ArrayBuffer, TypedArray, Buffer or DataView, got Array/);
      await expect(api.copy(new Uint8Array(4), new Uint8Array(4), { threads: 0 })).rejects.toThrow(/invalid options \(threads:/);
    });
  });

  describe('readFile / writeFile', () => {
    const sizes = [0, 1, 4095, 4096, 4097, 3 * 4096 + 123, (5 << 20) + 17];
    const engines = ['auto', 'pread', ...(name === 'native' && binding?.features.ioUring ? ['io_uring' as const] : [])] as const;

    it('round-trips files whose sizes are not multiples of 4096, direct or buffered, aligned or not', async () => {
      for (const size of sizes) {
        const data = randomBytes(size, size + 1);
        const path = join(dir, `${name}-round-${size}.bin`);
        for (const direct of [false, true]) {
          const written = await api.writeFile(path, data, { direct, chunkSize: 8192, queueDepth: 3 });
          expect(written.bytes).toBe(size);
          expect(Buffer.from(await readFile(path)).equals(Buffer.from(data))).toBe(true);
          for (const engine of engines) {
            const pinned = new Uint8Array(await api.allocPinned(size));
            const result = await api.readFile(path, pinned, { direct, engine, chunkSize: 8192, queueDepth: 3 });
            expect(result.bytes).toBe(size);
            expect(Buffer.from(pinned).equals(Buffer.from(data))).toBe(true);
            if (name === 'native') {
              expect(result.direct).toBe(direct && directSupported);
              // 'auto' is pread threads; io_uring only by name (README: measured no faster, seen to hang once).
              if (engine === 'auto' && size > 0) expect(result.engine).toBe('pread');
              else if (size > 0) expect(result.engine).toBe(engine);
            } else expect(result).toMatchObject({ direct: false, engine: 'js' });
            // An unaligned destination goes through aligned bounce buffers.
            const plain = new Uint8Array(size + 5);
            await api.readFile(path, plain.subarray(5), { direct, engine, chunkSize: 8192 });
            expect(Buffer.from(plain.subarray(5)).equals(Buffer.from(data))).toBe(true);
          }
        }
      }
    });

    it('reads a range at aligned and unaligned offsets', async () => {
      const data = randomBytes(70_000, 3);
      const path = join(dir, `${name}-range.bin`);
      await writeFile(path, data);
      for (const offset of [0, 1, 4096, 5000, 65_536, 69_999]) {
        for (const length of [1, 100, 4096, 70_000 - offset]) {
          if (offset + length > data.length) continue;
          for (const direct of [false, true]) {
            const dst = new Uint8Array(await api.allocPinned(length));
            await api.readFile(path, dst, { offset, direct, chunkSize: 16_384 });
            expect(Buffer.from(dst).equals(Buffer.from(data.subarray(offset, offset + length))), `offset ${offset} length ${length} direct ${direct}`).toBe(true);
          }
        }
      }
    });

    it('reports a short file with the path and sizes, or reads what is there with allowShort', async () => {
      const path = join(dir, `${name}-short.bin`);
      await writeFile(path, randomBytes(5000, 4));
      for (const direct of [false, true]) {
        const error = await api.readFile(path, new Uint8Array(8192), { direct }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(PinnedIoError);
        expect(error).toMatchObject({ code: 'ERR_SHORT_READ', path, offset: 0 });
        expect((error as Error).message).toBe(
          `readFile ${path}: only 5000 of the 8192 bytes requested at offset 0 exist (the file ends at byte 5000); pass a smaller buffer or { allowShort: true } to accept a partial read`,
        );
        await expect(api.readFile(path, new Uint8Array(10), { offset: 6000, direct })).rejects.toThrow(/only 0 of the 10 bytes requested at offset 6000/);
        const dst = new Uint8Array(await api.allocPinned(8192));
        const result = await api.readFile(path, dst, { direct, allowShort: true });
        expect(result.bytes).toBe(5000);
        expect(dst.subarray(5000).every((b) => b === 0)).toBe(true);
      }
    });

    it('reports a missing file or a directory with the path, system call and errno text', async () => {
      const missing = join(dir, 'no-such-file.bin');
      const error = await api.readFile(missing, new Uint8Array(4), { direct: true }).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'ENOENT', syscall: 'open', path: missing, errno: -2 });
      expect((error as Error).message).toBe(`readFile ${missing}: open failed at byte 0: no such file or directory (ENOENT)`);
      await expect(api.readFile(dir, new Uint8Array(4))).rejects.toMatchObject({ code: 'EISDIR', path: dir });
      await expect(api.writeFile(join(dir, 'missing-dir', 'x.bin'), new Uint8Array(4))).rejects.toThrow(/writeFile .*x\.bin: open failed at byte 0: no such file or directory \(ENOENT\)/);
    });

    it('replaces a whole file atomically and leaves no temporary file behind, even on failure', async () => {
      const sub = join(dir, `${name}-atomic`);
      await mkdir(sub);
      const path = join(sub, 'weights.bin');
      await api.writeFile(path, randomBytes(10_000, 5), { direct: true });
      const shorter = randomBytes(3000, 6);
      await api.writeFile(path, shorter, { direct: true });
      expect(Buffer.from(await readFile(path)).equals(Buffer.from(shorter))).toBe(true);
      await expect(api.writeFile(join(sub, 'weights.bin', 'nested'), shorter)).rejects.toThrow(PinnedIoError);
      expect(await readdir(sub)).toEqual(['weights.bin']);
    });

    it('writes in place at an offset, keeping the rest of the file', async () => {
      const path = join(dir, `${name}-inplace.bin`);
      const base = randomBytes(20_000, 7);
      await writeFile(path, base);
      const patch = randomBytes(5000, 8);
      for (const [offset, direct] of [
        [8192, true],
        [100, true],
        [15_000, false],
      ] as const) {
        await api.writeFile(path, patch, { offset, direct });
        base.set(patch, offset);
        const expected = Buffer.concat([Buffer.from(base), Buffer.alloc(Math.max(0, offset + patch.length - base.length))]);
        expect(Buffer.from(await readFile(path)).equals(expected.subarray(0, Math.max(base.length, offset + patch.length)))).toBe(true);
      }
      await truncate(path, 20_000);
    });

    it('validates options and paths', async () => {
      await expect(api.readFile('', new Uint8Array(1))).rejects.toThrow(/path must be a non-empty string/);
      await expect(api.readFile(join(dir, 'x'), new Uint8Array(1), { chunkSize: 5000 })).rejects.toThrow(/chunkSize: must be a multiple of 4096/);
      await expect(api.readFile(join(dir, 'x'), new Uint8Array(1), { offset: -1 })).rejects.toThrow(/invalid options \(offset:/);
      await expect(api.writeFile(join(dir, 'x'), new Uint8Array(1), { allowShort: true } as never)).rejects.toThrow(/invalid options/);
      if (name === 'js') await expect(api.readFile(join(dir, 'x'), new Uint8Array(1), { engine: 'io_uring' })).rejects.toThrow(/engine 'io_uring' is not available \(the pure-JS fallback is in use\)/);
    });
  });

  describe('conversions', () => {
    it('validate their arguments', async () => {
      await expect(api.f16ToF32(new Uint8Array(4) as never)).rejects.toThrow(/src must be a Uint16Array, got Uint8Array \(wrap raw bytes/);
      await expect(api.f16ToF32(new Uint16Array(4), new Float32Array(3))).rejects.toThrow(/dst holds 3 elements but src has 4/);
      await expect(api.f32ToF16(new Float32Array(4), new Float32Array(4) as never)).rejects.toThrow(/dst must be a Uint16Array/);
    });

    it('allocate the destination when none is given', async () => {
      const out = await api.bf16ToF32(new Uint16Array([0x3f80, 0xc000]));
      expect(Array.from(out)).toEqual([1, -2]);
      expect(Array.from(await api.f32ToF16(new Float32Array([1, -2, 65504])))).toEqual([0x3c00, 0xc000, 0x7bff]);
    });

    it('swap the two leading axes while converting, each value landing where a plain transpose puts it', async () => {
      // [outer, inner, block] with sizes that split unevenly over 1..3 threads and blocks shorter than a SIMD lane.
      for (const [outer, inner, block] of [[5, 3, 7], [272, 64, 64], [1, 4, 16], [9, 1, 33]] as const) {
        const n = outer * inner * block;
        const halves = new Uint16Array(n);
        for (let i = 0; i < n; i++) halves[i] = (i * 7919) % 0x7c00; // finite f16 patterns
        const plain = await api.f16ToF32(halves);
        for (const threads of [1, 2, 3]) {
          const swapped = await api.f16ToF32(halves, undefined, { swap: { outer, inner }, threads });
          const back = await api.f32ToF16(swapped, undefined, { swap: { outer: inner, inner: outer }, threads });
          expect(Buffer.from(back.buffer).equals(Buffer.from(halves.buffer))).toBe(true); // (toEqual is slow on 1M elements)
          for (const [t, r, d] of [[0, 0, 0], [outer - 1, inner - 1, block - 1], [outer >> 1, inner >> 1, block >> 1]] as const) {
            expect(swapped[(r * outer + t) * block + d]).toBe(plain[(t * inner + r) * block + d]);
          }
        }
        const bf = await api.bf16ToF32(halves, undefined, { swap: { outer, inner } });
        expect(bf[((inner - 1) * outer + 0) * block]).toBe((await api.bf16ToF32(halves.subarray((inner - 1) * block, (inner - 1) * block + 1)))[0]);
      }
    });

    it('refuse a swap that does not tile the source', async () => {
      await expect(api.f16ToF32(new Uint16Array(10), undefined, { swap: { outer: 3, inner: 2 } })).rejects.toThrow(/swap\.outer × swap\.inner \(3 × 2\) must divide src's 10 elements/);
      await expect(api.f16ToF32(new Uint16Array(10), undefined, { swap: { outer: 0, inner: 2 } } as never)).rejects.toThrow(/f16ToF32/);
    });
  });
});

describe.runIf(binding)('native build', () => {
  it('reports its features', () => {
    expect(binding!.features.hardwareThreads).toBeGreaterThanOrEqual(1);
    expect(typeof binding!.features.ioUring).toBe('boolean');
  });
});

describe('mlock refusal', () => {
  it('is a single warning naming the fix, and the buffer is still usable', async () => {
    // The real native backend, with the lock refused the way the addon reports it (ENOMEM over RLIMIT_MEMLOCK);
    // the refusal itself is produced for real in native-loading.test.ts.
    const base = binding ? nativeBackend(binding) : jsBackend;
    const refusing = { ...base, kind: 'native' as const, allocPinned: async (bytes: number) => ({ ...(await base.allocPinned(bytes)), locked: false, lockErrno: 12 }) };
    const api = createPinnedMemory(refusing, { ioUring: false });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      const a = await api.allocPinned(4096);
      await api.allocPinned(4096);
      await new Promise((resolve) => setImmediate(resolve));
      expect(api.isPinned(a)).toBe(false);
      expect(new Uint8Array(a).fill(1)[4095]).toBe(1);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings).toEqual([expect.stringMatching(/^allocPinned: mlock failed \(ENOMEM: over the RLIMIT_MEMLOCK limit\).*ulimit -l.*CAP_IPC_LOCK/)]);
  });
});
