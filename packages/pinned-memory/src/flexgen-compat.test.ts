import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { jsBackend } from './js-backend.js';
import { loadNativeBinding, nativeBackend } from './native-backend.js';
import { createPinnedMemory, type PinnedMemory } from './pinned-memory.js';

// Reference bytes produced by FlexLLMGen itself (scripts/flexgen-fixtures.py: TorchCompressedDevice.load_from_np on
// the CPU with torch 1.13), so byte compatibility is checked against the original, not against a re-derivation.
interface FixtureCase {
  name: string;
  dtype: 'f16' | 'f32';
  shape: number[];
  groupSize: number;
  groupDim: number;
  input: string;
  packedShape: number[];
  packed: string;
  scaleShape: number[];
  scale: string;
  dequantized: string;
}

const fixture = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'flexgen-compress.json'), 'utf8')) as { cases: FixtureCase[] };
const binding = loadNativeBinding();
const implementations: Array<[string, PinnedMemory]> = [['js', createPinnedMemory(jsBackend, { ioUring: false })]];
if (binding) implementations.push(['native', createPinnedMemory(nativeBackend(binding), { ioUring: false })]);

function bytes(base64: string): Buffer {
  return Buffer.from(base64, 'base64');
}

/**
 * FlexLLMGen copies only the packed bytes that hold real elements (get_compressed_indices slices the grouped dimension
 * to ceil(dim / 2) bytes); the padding bytes after them stay uninitialised (torch.empty). So those bytes are compared
 * and the rest must be quantised zero padding on our side, which makes the output deterministic.
 */
function meaningfulPacked(packed: Uint8Array, c: FixtureCase): Uint8Array {
  const d = c.groupDim < 0 ? c.groupDim + c.shape.length : c.groupDim;
  const outer = c.shape.slice(0, d).reduce((a, b) => a * b, 1);
  const inner = c.shape.slice(d + 1).reduce((a, b) => a * b, 1);
  const rows = c.packedShape[d];
  const kept = Math.ceil(c.shape[d]! / 2);
  const out: number[] = [];
  for (let o = 0; o < outer; o++) for (let p = 0; p < kept; p++) for (let i = 0; i < inner; i++) out.push(packed[(o * rows! + p) * inner + i]!);
  return Uint8Array.from(out);
}

/** Index of the first differing byte, or -1. */
function firstDifference(a: Uint8Array, b: Uint8Array): number {
  if (a.length !== b.length) return Math.min(a.length, b.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

describe.each(implementations)('byte compatibility with FlexLLMGen (%s)', (_name, api) => {
  for (const c of fixture.cases) {
    it(c.name, async () => {
      const raw = bytes(c.input);
      const copy = new Uint8Array(raw).buffer; // aligned copy for the typed-array view
      const src = c.dtype === 'f16' ? new Uint16Array(copy) : new Float32Array(copy);
      const q = await api.quantize4(src, { shape: c.shape, groupSize: c.groupSize, groupDim: c.groupDim });
      expect(q.packedShape).toEqual(c.packedShape);
      expect(q.scaleShape).toEqual(c.scaleShape);
      expect(firstDifference(meaningfulPacked(q.packed, c), meaningfulPacked(bytes(c.packed), c))).toBe(-1);
      expect(firstDifference(new Uint8Array(q.scale.buffer), bytes(c.scale))).toBe(-1);
      const back = await api.dequantize4(q);
      expect(firstDifference(new Uint8Array(back.buffer), bytes(c.dequantized))).toBe(-1);
    });
  }
});
