import { f16ToF32, f32ToF16 } from '@flexhelm/python-compat';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

import { addonPath, loadNativeBinding } from './native-backend.js';
import { jsBackend } from './js-backend.js';
import { groupLayout } from './group-layout.js';

const nodePrefix = resolve(dirname(process.execPath), '..');
const canBuild =
  process.env.FLEXHELM_NATIVE_BUILD !== '0' &&
  existsSync(join(nodePrefix, 'include', 'node', 'node_api.h')) &&
  spawnSync(process.env.CXX ?? 'c++', ['--version']).status === 0;

describe('native addon', () => {
  it.runIf(canBuild)('was built, since a compiler and Node headers are present', () => {
    expect(existsSync(addonPath), `${addonPath} is missing: run \`pnpm --filter @flexhelm/pinned-memory build:native\``).toBe(true);
    expect(loadNativeBinding()).toBeDefined();
  });

  it.runIf(existsSync(addonPath))('returns pinned memory to the system when the buffers are collected', () => {
    // 8 x 32 MiB touched, then dropped: the finalizer must munlock/munmap them (RSS falls back).
    const script = `
      const b = require(${JSON.stringify(addonPath)});
      const rss = () => process.memoryUsage().rss;
      (async () => {
        const before = rss();
        let buffers = [];
        for (let i = 0; i < 8; i++) { const { buffer } = await b.allocPinned(32 << 20); new Uint8Array(buffer).fill(1); buffers.push(buffer); }
        const grown = rss() - before;
        buffers = null;
        for (let i = 0; i < 5; i++) { globalThis.gc(); await new Promise((r) => setTimeout(r, 20)); }
        process.stdout.write(JSON.stringify({ grown, left: rss() - before }));
      })();`;
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
    expect(child.stderr).toBe('');
    const { grown, left } = JSON.parse(child.stdout) as { grown: number; left: number };
    expect(grown).toBeGreaterThan(200 << 20);
    expect(left).toBeLessThan(64 << 20);
  });

  const canDropLockCapability = process.getuid?.() === 0 && spawnSync('setpriv', ['--bounding-set=-ipc_lock', '--', 'true']).status === 0;
  it.runIf(existsSync(addonPath) && canDropLockCapability)('reports a refused mlock instead of failing (no CAP_IPC_LOCK, 64 KiB limit)', () => {
    const script = `require(${JSON.stringify(addonPath)}).allocPinned(1 << 20).then((r) =>
      process.stdout.write(JSON.stringify({ locked: r.locked, lockErrno: r.lockErrno, bytes: r.buffer.byteLength, zero: new Uint8Array(r.buffer).every((b) => b === 0) })))`;
    const child = spawnSync('setpriv', ['--bounding-set=-ipc_lock', '--', 'sh', '-c', 'ulimit -l 64 && exec "$0" -e "$1"', process.execPath, script], { encoding: 'utf8' });
    expect(child.stderr).toBe('');
    expect(JSON.parse(child.stdout)).toEqual({ locked: false, lockErrno: 12, bytes: 1 << 20, zero: true });
  });

  // Each kernel has baseline, AVX2/F16C and AVX-512 versions picked at run time; FLEXHELM_NATIVE_SIMD caps the choice
  // so the versions this CPU would not pick are checked too (in a child process: the choice is made once at load).
  for (const level of ['scalar', 'avx2']) {
    it.runIf(existsSync(addonPath))(`gives the same bits with FLEXHELM_NATIVE_SIMD=${level}`, () => {
      const script = `
        const b = require(${JSON.stringify(addonPath)});
        const n = 70000;
        const halves = new Uint16Array(n); for (let i = 0; i < n; i++) halves[i] = (i * 40503) & 0xffff;
        const floats = new Float32Array(n); for (let i = 0; i < n; i++) floats[i] = Math.sin(i) * 2 ** ((i % 60) - 30);
        const out = {};
        const f32 = new Float32Array(n), f16 = new Uint16Array(n), bf = new Float32Array(n);
        const packed = new Uint8Array(${groupLayout([700, 100], 64, 0, '').packedLength});
        const scale = new Uint16Array(${groupLayout([700, 100], 64, 0, '').scaleLength});
        const back = new Float32Array(n);
        const layout = { outer: 1, dim: 700, inner: 100, group: 64 };
        Promise.all([b.f16ToF32(halves, f32, 2), b.f32ToF16(floats, f16, 2), b.bf16ToF32(halves, bf, 2),
                     b.quantize4(floats, false, layout, packed, scale, 2)])
          .then(() => b.dequantize4(packed, scale, layout, back, 2))
          .then(() => process.stdout.write(JSON.stringify([f32, f16, bf, packed, scale, back].map((a) => Buffer.from(a.buffer).toString('base64')))));`;
      const child = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, FLEXHELM_NATIVE_SIMD: level }, encoding: 'utf8', maxBuffer: 64 << 20 });
      expect(child.stderr).toBe('');
      const [f32, f16, bf, packed, scale, back] = (JSON.parse(child.stdout) as string[]).map((s) => Buffer.from(s, 'base64')) as [Buffer, Buffer, Buffer, Buffer, Buffer, Buffer];
      const n = 70000;
      const halves = new Uint16Array(n).map((_, i) => (i * 40503) & 0xffff);
      const floats = new Float32Array(n).map((_, i) => Math.sin(i) * 2 ** ((i % 60) - 30));
      const expectF32 = new Float32Array(n);
      f16ToF32(halves, expectF32);
      expect(f32.equals(Buffer.from(expectF32.buffer))).toBe(true);
      const expectF16 = new Uint16Array(n);
      f32ToF16(floats, expectF16);
      expect(f16.equals(Buffer.from(expectF16.buffer))).toBe(true);
      expect(bf.equals(Buffer.from(new Uint32Array(n).map((_, i) => halves[i]! << 16).buffer))).toBe(true);
      return checkQuantized(floats, packed, scale, back);
    });
  }
});

async function checkQuantized(floats: Float32Array, packed: Buffer, scale: Buffer, back: Buffer) {
  const layout = groupLayout([700, 100], 64, 0, 'test');
  const expectPacked = new Uint8Array(layout.packedLength);
  const expectScale = new Uint16Array(layout.scaleLength);
  await jsBackend.quantize4(floats, layout, expectPacked, expectScale, 1);
  expect(packed.equals(Buffer.from(expectPacked))).toBe(true);
  expect(scale.equals(Buffer.from(expectScale.buffer))).toBe(true);
  const expectBack = new Float32Array(layout.elements);
  await jsBackend.dequantize4(expectPacked, expectScale, layout, expectBack, 1);
  expect(back.equals(Buffer.from(expectBack.buffer))).toBe(true);
}

