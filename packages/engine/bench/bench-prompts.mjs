// The benchmark's prompts: `batch` rows of bos + random ids, the same for our engine and the peer (same seed).
import { SeededUniform } from '../dist/index.js';

export function benchPrompts(batch, length, vocab, seed) {
  const rng = new SeededUniform(seed);
  return Array.from({ length: batch }, () => [2, ...Array.from({ length: length - 1 }, () => 4 + Math.floor(rng.next() * (vocab - 4)))]);
}
