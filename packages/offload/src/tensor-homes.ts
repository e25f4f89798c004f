import type { OwnTensor } from '@flexhelm/engine';
import { allocPinned, type Quantized4 } from '@flexhelm/pinned-memory';
import type { Tier } from './placement.js';

/**
 * A tensor's home copy on the host tier: f16 bit patterns, FlexLLMGen 4-bit groups, or the compute backend's own
 * stored form (`OwnTensor`, e.g. a GGUF file's blocks) in pinned memory.
 */
type HostHome = { tier: 'host'; f16?: Uint16Array; q4?: Quantized4; own?: OwnTensor };
/**
 * A tensor's home on the disk tier: a byte range of its object's file (f16, packed codes followed by f16 scales, or a
 * backend's stored form of `own.bytes` bytes).
 */
export type DiskHome = { tier: 'disk'; offset: number; elements: number; q4?: Omit<Quantized4, 'packed' | 'scale'> & { packedBytes: number; scaleLength: number }; own?: { format: string; bytes: number } };
/** On the compute tier: float32 in the backend, or `ownBytes` of the backend's stored form. */
export type Home = { tier: 'compute'; ownBytes?: number } | HostHome | DiskHome;

/** A layer object's tensors off the compute tier: where each lives, and its disk file (one O_DIRECT read). */
export interface TensorHomes<K extends string> {
  homes: Map<K, Home>;
  file?: string;
  fileBytes: number;
}

/**
 * One tensor to place: its values (float32, in the layout the backend takes) and, with compression, its 4-bit form;
 * or, for a matrix the backend holds in a form of its own, that form (`own`; `data` then empty), stored as it is.
 */
export interface Placed<K extends string> {
  key: K;
  tier: Tier;
  data: Float32Array;
  q?: Quantized4;
  own?: OwnTensor;
}

/** Bytes a tensor of `elements` values takes in its home (fp32 on the compute tier; a stored form at its size). */
export function homeBytes(home: Home, elements: number): number {
  if (home.tier === 'compute') return home.ownBytes ?? 4 * elements;
  if (home.tier === 'host') return home.own ? home.own.bytes.byteLength : home.q4 ? home.q4.packed.byteLength + home.q4.scale.byteLength : 2 * elements;
  return home.own ? home.own.bytes : home.q4 ? home.q4.packedBytes + 2 * home.q4.scaleLength : 2 * elements;
}

/** A backend's stored form copied into pinned memory (the host tier's home copy; page aligned, as the backend asks). */
export async function pinnedOwn(own: OwnTensor): Promise<OwnTensor> {
  const bytes = new Uint8Array(await allocPinned(own.bytes.byteLength));
  bytes.set(own.bytes);
  return { format: own.format, bytes };
}

/** A 4-bit tensor's codes and scales copied into pinned memory (the host tier's home copy). */
export async function pinnedQuantized(q: Quantized4): Promise<Quantized4> {
  const packed = new Uint8Array(await allocPinned(q.packed.byteLength));
  packed.set(q.packed);
  const scale = new Uint16Array(await allocPinned(q.scale.byteLength));
  scale.set(q.scale);
  return { ...q, packed, scale };
}
