import type { LogitsMath } from './logits-math.js';
import type { ModelDescription } from './model-description.js';

/** What a batch of `generate` holds in memory beyond the model: its longest prompt, its most new tokens, echo or not. */
export interface BatchNeed {
  promptTokens: number;
  newTokens: number;
  /** Some row scores its prompt (echo): the head runs over chunks of prompt positions. */
  echo: boolean;
}

/**
 * A loaded model as `generate` drives it (the engine's `Engine` is one): its description, the memory checks of a batch,
 * and batches of left-padded rows with a KV cache.
 */
export interface Decoder {
  readonly description: ModelDescription;
  /** Refuses a request that cannot fit the memory budget even as a batch of its own (`index` names it). */
  checkRequestMemory(need: BatchNeed, index?: number): void;
  /** Whether a batch of `rows` rows shaped by `need` fits the memory budget. */
  batchFits(rows: number, need: BatchNeed): boolean;
  /** Starts a batch of `batch` left-padded rows (mask 0 marks padding). */
  startBatch(batch: number): DecoderBatch;
}

/** One batch's forward state: rows fed token by token against their KV cache. */
export interface DecoderBatch {
  /** Rows in the batch. */
  readonly batch: number;
  /** Tokens fed so far per row (the cache's length). */
  readonly tokens: number;
  /** Whether `expandRows` can copy a one-row prefix into more rows. */
  readonly canExpandRows: boolean;
  /** Copies the one row fed so far into `rows` rows (a prompt prefix shared by every row). */
  expandRows(rows: number): Promise<void>;
  /** Feeds `ids` `[rows][seq]` with their mask; the final hidden states `[rows·seq, hidden]`. */
  step(ids: number[][], mask: number[][]): Promise<Float32Array>;
  /** Logits `[picks, vocab]` of the hidden states of a step of width `seq` at the picked rows and positions. */
  logits(hidden: Float32Array, seq: number, picks: { row: number; pos: number }[]): Promise<Float32Array>;
  /** Optional: the backend's `logitsMath` (exactly `jsLogitsMath`, faster), which `generate` then uses. */
  readonly logitsMath?: LogitsMath;
  close(): Promise<void>;
}
