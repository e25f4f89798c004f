import { ModelFileError } from '@flexhelm/engine';
import type { GgufFile, GgufValue } from './read-gguf.js';

/** Typed access to a file's metadata: a missing required key or a value of the wrong type names the key. */
export class GgufMetadata {
  constructor(private readonly file: GgufFile) {}

  get path(): string {
    return this.file.path;
  }

  has(key: string): boolean {
    return this.file.metadata.has(key);
  }

  raw(key: string): GgufValue | undefined {
    return this.file.metadata.get(key);
  }

  fail(key: string, what: string): ModelFileError {
    return new ModelFileError(`${this.file.path}: metadata ${key} ${what}`);
  }

  /** A number (any integer or float type; 64-bit integers converted when safe). */
  number(key: string): number;
  number(key: string, fallback: number): number;
  number(key: string, fallback: number | undefined): number | undefined;
  number(key: string, ...rest: [number | undefined] | []): number | undefined {
    const v = this.file.metadata.get(key);
    if (v === undefined) {
      if (rest.length) return rest[0];
      throw this.fail(key, 'is missing; the file does not say this model size');
    }
    if (typeof v === 'bigint') {
      if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < -BigInt(Number.MAX_SAFE_INTEGER)) throw this.fail(key, `is ${v}, out of range`);
      return Number(v);
    }
    if (typeof v !== 'number' || !Number.isFinite(v)) throw this.fail(key, `is ${JSON.stringify(String(v))}; it must be a number`);
    return v;
  }

  /** A positive integer (sizes and counts). */
  count(key: string): number;
  count(key: string, fallback: number): number;
  count(key: string, fallback: number | undefined): number | undefined;
  count(key: string, ...rest: [number | undefined] | []): number | undefined {
    const v = rest.length ? this.number(key, rest[0]) : this.number(key);
    if (v === undefined) return undefined;
    if (!Number.isInteger(v) || v < 1) throw this.fail(key, `is ${v}; it must be a positive integer`);
    return v;
  }

  string(key: string): string | undefined {
    const v = this.file.metadata.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw this.fail(key, 'must be a string');
    return v;
  }

  bool(key: string): boolean | undefined {
    const v = this.file.metadata.get(key);
    if (v === undefined) return undefined;
    if (typeof v !== 'boolean') throw this.fail(key, 'must be a bool');
    return v;
  }

  /** An array whose items all pass `check` (`what` names the item type in the message). */
  array<T extends GgufValue>(key: string, check: (v: GgufValue) => v is T, what: string): T[] | undefined {
    const v = this.file.metadata.get(key);
    if (v === undefined) return undefined;
    if (!Array.isArray(v)) throw this.fail(key, `must be an array of ${what}`);
    for (let i = 0; i < v.length; i++) if (!check(v[i]!)) throw this.fail(key, `item ${i} is not a ${what}`);
    return v as T[];
  }
}

export const isString = (v: GgufValue): v is string => typeof v === 'string';
export const isNumber = (v: GgufValue): v is number => typeof v === 'number';
