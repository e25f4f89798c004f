/**
 * The ggml tensor types flexhelm reads (ids as in ggml.h's `enum ggml_type`): values per block and bytes per block.
 * Other ids are known by name only, so a file holding them is refused naming the type rather than a number.
 */
export const GGML_TYPES = {
  F32: { id: 0, blockValues: 1, blockBytes: 4 },
  F16: { id: 1, blockValues: 1, blockBytes: 2 },
  Q4_0: { id: 2, blockValues: 32, blockBytes: 18 },
  Q4_1: { id: 3, blockValues: 32, blockBytes: 20 },
  Q8_0: { id: 8, blockValues: 32, blockBytes: 34 },
  Q4_K: { id: 12, blockValues: 256, blockBytes: 144 },
  Q5_K: { id: 13, blockValues: 256, blockBytes: 176 },
  Q6_K: { id: 14, blockValues: 256, blockBytes: 210 },
  BF16: { id: 30, blockValues: 1, blockBytes: 2 },
} as const;

export type GgmlTypeName = keyof typeof GGML_TYPES;

/** ggml's names of the types it has that flexhelm does not read (for the error message). */
const OTHER_TYPES: Record<number, string> = {
  6: 'Q5_0', 7: 'Q5_1', 9: 'Q8_1', 10: 'Q2_K', 11: 'Q3_K', 15: 'Q8_K', 16: 'IQ2_XXS', 17: 'IQ2_XS', 18: 'IQ3_XXS',
  19: 'IQ1_S', 20: 'IQ4_NL', 21: 'IQ3_S', 22: 'IQ2_S', 23: 'IQ4_XS', 24: 'I8', 25: 'I16', 26: 'I32', 27: 'I64', 28: 'F64',
  29: 'IQ1_M', 34: 'TQ1_0', 35: 'TQ2_0', 39: 'MXFP4',
};

const BY_ID = new Map<number, GgmlTypeName>(Object.entries(GGML_TYPES).map(([name, t]) => [t.id, name as GgmlTypeName]));

/** The type of an id, or undefined; `describeGgmlType` names it for a message. */
export function ggmlTypeById(id: number): GgmlTypeName | undefined {
  return BY_ID.get(id);
}

/** `Q5_0 (6)` or `type 99`: how messages name a type id. */
export function describeGgmlType(id: number): string {
  const name = BY_ID.get(id) ?? OTHER_TYPES[id];
  return name ? `${name} (${id})` : `unknown type ${id}`;
}

/** Bytes a row-major run of `count` values takes in `type`; `count` must be whole blocks (checked by the reader). */
export function ggmlByteSize(type: GgmlTypeName, count: number): number {
  const t = GGML_TYPES[type];
  return (count / t.blockValues) * t.blockBytes;
}
