import type { RequestResult } from '@flexhelm/core';
import type { Redis } from 'ioredis';
import { KEY_PREFIX } from './queue-names.js';
import { resultFromStoreJson, resultToStoreJson } from './result-json.js';

/** The Redis hash holding every finished request's result, keyed by `requestKey(modelId, request)`. */
export const RESULTS_KEY = `${KEY_PREFIX}results`;
/** How many writes found their request already recorded (a redelivered shard, or a duplicate across shards). */
export const DUPLICATE_WRITES_KEY = `${KEY_PREFIX}duplicate-writes`;

/**
 * The shared result store: one Redis hash, written with HSETNX so a request recorded twice (a shard redelivered
 * after its worker died, two workers racing) keeps its first value. It is the truth about what is done; queue
 * states and progress events only say where work is.
 */
export class ResultStore {
  constructor(private readonly redis: Redis) {}

  /** Records results; returns how many were new (the rest were already recorded and are left as they were). */
  async putMany(entries: readonly { key: string; result: RequestResult }[]): Promise<number> {
    if (entries.length === 0) return 0;
    const pipeline = this.redis.pipeline();
    for (const e of entries) pipeline.hsetnx(RESULTS_KEY, e.key, resultToStoreJson(e.result));
    const replies = (await pipeline.exec()) ?? [];
    let fresh = 0;
    for (const [err, value] of replies) {
      if (err) throw err;
      if (value === 1) fresh += 1;
    }
    if (fresh < entries.length) await this.redis.incrby(DUPLICATE_WRITES_KEY, entries.length - fresh);
    return fresh;
  }

  /** Which of `keys` are recorded. */
  async has(keys: readonly string[]): Promise<boolean[]> {
    if (keys.length === 0) return [];
    const pipeline = this.redis.pipeline();
    for (const k of keys) pipeline.hexists(RESULTS_KEY, k);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([err, value]) => {
      if (err) throw err;
      return value === 1;
    });
  }

  /** The recorded results of `keys` (undefined where missing), fetched in slices to keep replies small. */
  async getMany(keys: readonly string[]): Promise<(RequestResult | undefined)[]> {
    const out: (RequestResult | undefined)[] = [];
    for (let start = 0; start < keys.length; start += 500) {
      const slice = keys.slice(start, start + 500);
      const values = await this.redis.hmget(RESULTS_KEY, ...slice);
      values.forEach((text, i) => { out.push(text === null ? undefined : resultFromStoreJson(text, `result ${slice[i]} in Redis ${RESULTS_KEY}`)); });
    }
    return out;
  }

  async count(): Promise<number> {
    return this.redis.hlen(RESULTS_KEY);
  }

  async duplicateWrites(): Promise<number> {
    return Number((await this.redis.get(DUPLICATE_WRITES_KEY)) ?? 0);
  }
}
