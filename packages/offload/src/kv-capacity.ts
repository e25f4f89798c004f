/**
 * Tokens per row an in-place compute-tier KV cache (`TieredKvCache` with a backend's `InPlaceKvLayers`) makes room
 * for when it must hold `tokens`: 25% headroom, at least 64 tokens, so a prompt's cache takes the following decode
 * steps without growing (each growth is one copy of the segment). The memory plan counts the same.
 */
export function kvCapacityFor(tokens: number): number {
  return tokens + Math.max(64, tokens >> 2);
}

/** The capacity such a cache has after a prompt of `promptLen` tokens and decode steps up to `cachedTokens` in all. */
export function grownKvCapacity(promptLen: number, cachedTokens: number): number {
  let capacity = kvCapacityFor(promptLen);
  while (capacity < cachedTokens) capacity = kvCapacityFor(capacity + 1);
  return capacity;
}
