// Shapes of FlexLLMGen's 4-bit group-wise format. A tensor of `shape` is grouped along `groupDim`: it is viewed as
// [outer, dim, inner] (dim = shape[groupDim]), dim is padded with zeros to groups * groupSize, and
//   packed has shape shape[:groupDim] + [groups * groupSize / 2] + shape[groupDim+1:]  (uint8, two codes per byte)
//   scale  has shape shape[:groupDim] + [groups, 2] + shape[groupDim+1:]                (f16 bits: scale, min)
// exactly as TorchCompressedDevice.allocate lays them out.

export interface GroupLayout {
  shape: number[];
  groupSize: number;
  /** Normalised (non-negative) grouped dimension. */
  groupDim: number;
  outer: number;
  dim: number;
  inner: number;
  groups: number;
  packedShape: number[];
  scaleShape: number[];
  elements: number;
  packedLength: number;
  scaleLength: number;
}

/** Larger groups would make the native kernel's per-thread tile (groupSize x 64 floats) unreasonably big. */
const maxGroupSize = 65536;

export function groupLayout(shape: readonly number[], groupSize: number, groupDim: number, where: string): GroupLayout {
  if (!Array.isArray(shape) || shape.length === 0) throw new TypeError(`${where}: shape must be a non-empty array of dimension sizes`);
  for (const [i, size] of shape.entries()) {
    if (!Number.isSafeInteger(size) || size < 1) throw new RangeError(`${where}: shape[${i}] is ${String(size)}; every dimension must be a positive integer`);
  }
  if (!Number.isSafeInteger(groupSize) || groupSize < 2 || groupSize % 2 !== 0 || groupSize > maxGroupSize) {
    throw new RangeError(`${where}: groupSize is ${String(groupSize)}; it must be an even integer from 2 to ${maxGroupSize} (two 4-bit codes share a byte), e.g. 64`);
  }
  if (!Number.isSafeInteger(groupDim) || groupDim < -shape.length || groupDim >= shape.length) {
    throw new RangeError(`${where}: groupDim is ${String(groupDim)} but the tensor has ${shape.length} dimension(s); use 0..${shape.length - 1} (or a negative index)`);
  }
  const gd = groupDim < 0 ? groupDim + shape.length : groupDim;
  const product = (dims: readonly number[]) => dims.reduce((a, b) => a * b, 1);
  const outer = product(shape.slice(0, gd));
  const dim = shape[gd];
  const inner = product(shape.slice(gd + 1));
  const groups = Math.ceil(dim / groupSize);
  const packedShape = [...shape.slice(0, gd), (groups * groupSize) / 2, ...shape.slice(gd + 1)];
  const scaleShape = [...shape.slice(0, gd), groups, 2, ...shape.slice(gd + 1)];
  return {
    shape: [...shape],
    groupSize,
    groupDim: gd,
    outer,
    dim,
    inner,
    groups,
    packedShape,
    scaleShape,
    elements: outer * dim * inner,
    packedLength: product(packedShape),
    scaleLength: product(scaleShape),
  };
}
