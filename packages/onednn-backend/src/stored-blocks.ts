import { isOwnTensor, type OwnTensor, type StreamedTensor } from '@flexhelm/engine';
import type { QuantWeight } from './native-addon.js';

/** `OwnTensor.format` of the oneDNN backend's stored blocks: QuantLinear's stored form of the type that follows. */
export const STORED_FORMAT = 'ggml-stored:';

/**
 * Streamed tensors with the `OwnTensor`s (`ownTensors`' stored blocks, handed back) as the layer reads them:
 * `{ type, blocks, stored: true }`. Any other format was not made here and is refused.
 */
export function storedBlocksOf<T>(tensors: Partial<Record<string, T | OwnTensor>>): Partial<Record<string, T | QuantWeight>> {
  const out: Partial<Record<string, T | QuantWeight>> = {};
  for (const [key, t] of Object.entries(tensors)) {
    if (t === undefined || !isOwnTensor(t as StreamedTensor)) {
      out[key] = t as T | undefined;
      continue;
    }
    const own = t as OwnTensor;
    if (!own.format.startsWith(STORED_FORMAT) || !(own.bytes instanceof Uint8Array)) throw new Error(`OneDnnBackend: streamed ${key} is in format '${own.format}'; this backend reads only its own ownTensors() forms (${STORED_FORMAT}<type>)`);
    out[key] = { type: own.format.slice(STORED_FORMAT.length) as QuantWeight['type'], blocks: own.bytes, stored: true };
  }
  return out;
}
