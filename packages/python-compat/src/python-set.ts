/**
 * A CPython 3.11 `set` of ints, tuples of ints or strs that iterates in CPython's order: the open-addressing table of
 * `Objects/setobject.c` (linear probes of 9, perturbed probing, resize at 3/5 full) over CPython's hashes, strs hashed
 * with SipHash-1-3 under `PYTHONHASHSEED=0` (the setting HELM's golden data uses). HELM's numeracy scenario draws from
 * `list(set(a) - set(b))` by position and run specs build the `ablation*` model families from sets, so the slot order
 * decides what comes out.
 */
export type PythonSetKey = number | string | readonly number[];

const MIN_SIZE = 8;
const LINEAR_PROBES = 9;
const PERTURB_SHIFT = 5n;
const UINT64 = (1n << 64n) - 1n;
/** `sys.hash_info.modulus` on 64-bit builds. */
const HASH_MODULUS = (1n << 61n) - 1n;
const XXPRIME_1 = 11400714785074694791n;
const XXPRIME_2 = 14029467366897019727n;
const XXPRIME_5 = 2870177450012600261n;

/** `hash(n)` for a Python int, as the unsigned 64-bit value C code sees (`(size_t)hash`). */
export function pythonIntHash(n: number | bigint): bigint {
  if (typeof n === 'number' && !Number.isInteger(n)) throw new RangeError(`pythonIntHash: ${n} is not an integer`);
  const big = BigInt(n);
  let h = big < 0n ? -(-big % HASH_MODULUS) : big % HASH_MODULUS;
  if (h === -1n) h = -2n;
  return h & UINT64;
}

/** `hash(t)` for a tuple of Python ints (CPython 3.8+ xxHash-based `tuplehash`), unsigned 64-bit. */
export function pythonTupleHash(items: readonly number[]): bigint {
  let acc = XXPRIME_5;
  for (const item of items) {
    acc = (acc + pythonIntHash(item) * XXPRIME_2) & UINT64;
    acc = ((acc << 31n) | (acc >> 33n)) & UINT64;
    acc = (acc * XXPRIME_1) & UINT64;
  }
  acc = (acc + (BigInt(items.length) ^ (XXPRIME_5 ^ 3527539n))) & UINT64;
  return acc === UINT64 ? 1546275796n : acc;
}


const rotl = (x: bigint, b: bigint) => ((x << b) | (x >> (64n - b))) & UINT64;

/** SipHash-1-3 of `bytes` with key (k0, k1), as CPython's `Python/pyhash.c`. */
export function siphash13(bytes: Uint8Array, k0 = 0n, k1 = 0n): bigint {
  let v0 = k0 ^ 0x736f6d6570736575n;
  let v1 = k1 ^ 0x646f72616e646f6dn;
  let v2 = k0 ^ 0x6c7967656e657261n;
  let v3 = k1 ^ 0x7465646279746573n;
  const round = () => {
    v0 = (v0 + v1) & UINT64; v1 = rotl(v1, 13n); v1 ^= v0; v0 = rotl(v0, 32n);
    v2 = (v2 + v3) & UINT64; v3 = rotl(v3, 16n); v3 ^= v2;
    v0 = (v0 + v3) & UINT64; v3 = rotl(v3, 21n); v3 ^= v0;
    v2 = (v2 + v1) & UINT64; v1 = rotl(v1, 17n); v1 ^= v2; v2 = rotl(v2, 32n);
  };
  const word = (at: number, n: number) => {
    let m = 0n;
    for (let k = n - 1; k >= 0; k--) m = (m << 8n) | BigInt(bytes[at + k]!);
    return m;
  };
  const full = bytes.length - (bytes.length % 8);
  for (let at = 0; at < full; at += 8) {
    const m = word(at, 8);
    v3 ^= m;
    round();
    v0 ^= m;
  }
  const last = (BigInt(bytes.length & 0xff) << 56n) | word(full, bytes.length - full);
  v3 ^= last;
  round();
  v0 ^= last;
  v2 ^= 0xffn;
  round();
  round();
  round();
  return (v0 ^ v1 ^ v2 ^ v3) & UINT64;
}

/** `hash(s)` of a Python str with hash randomization off, as an unsigned 64-bit value (what the table indexes with). */
export function pyStrHash(s: string): bigint {
  if (s.length === 0) return 0n;
  const codePoints = [...s].map((c) => c.codePointAt(0)!);
  const max = Math.max(...codePoints);
  // CPython hashes the string's internal buffer: 1, 2 or 4 bytes per code point, little-endian.
  const width = max < 256 ? 1 : max < 65536 ? 2 : 4;
  const bytes = new Uint8Array(codePoints.length * width);
  codePoints.forEach((cp, i) => {
    for (let b = 0; b < width; b++) bytes[i * width + b] = (cp >> (8 * b)) & 0xff;
  });
  const h = siphash13(bytes);
  // hash -1 is reserved for errors in CPython and becomes -2.
  return h === UINT64 ? UINT64 - 1n : h;
}

function hashOf(key: PythonSetKey): bigint {
  if (typeof key === 'number') return pythonIntHash(key);
  return typeof key === 'string' ? pyStrHash(key) : pythonTupleHash(key);
}

function sameKey(a: PythonSetKey, b: PythonSetKey): boolean {
  if (typeof a !== 'object' || typeof b !== 'object') return a === b;
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

interface Slot<K> {
  key: K;
  hash: bigint;
}

/** A removed entry: keeps probe chains intact, as CPython's `dummy`. */
const DUMMY = Symbol('dummy');
type TableEntry<K> = Slot<K> | typeof DUMMY | undefined;

export class PythonSet<K extends PythonSetKey> implements Iterable<K> {
  private table: TableEntry<K>[] = new Array(MIN_SIZE);
  private mask = MIN_SIZE - 1;
  /** Active plus dummy entries. */
  private fill = 0;
  private used = 0;

  /** `set(iterable)` for a non-set iterable: one insertion per item, in order. */
  static from<K extends PythonSetKey>(items: Iterable<K>): PythonSet<K> {
    const set = new PythonSet<K>();
    for (const item of items) set.add(item);
    return set;
  }

  get size(): number {
    return this.used;
  }

  /** Iterates in table-slot order, as `list(s)` does. */
  *[Symbol.iterator](): Iterator<K> {
    for (const entry of this.table) if (entry !== undefined && entry !== DUMMY) yield entry.key;
  }

  has(key: K): boolean {
    return this.findIndex(key, hashOf(key)) >= 0;
  }

  add(key: K): void {
    this.addEntry(key, hashOf(key));
  }

  /** `s.discard(key)`. */
  discard(key: K): void {
    const index = this.findIndex(key, hashOf(key));
    if (index < 0) return;
    this.table[index] = DUMMY;
    this.used--;
  }

  /** `self - other` (CPython's `set_difference`, including its copy-then-discard shortcut for a small `other`). */
  difference(other: PythonSet<K>): PythonSet<K> {
    if (this.used >> 2 > other.used) {
      const result = this.copy();
      for (const key of other) result.discard(key);
      return result;
    }
    const result = new PythonSet<K>();
    for (const entry of this.table) {
      if (entry === undefined || entry === DUMMY) continue;
      if (other.findIndex(entry.key, entry.hash) < 0) result.addEntry(entry.key, entry.hash);
    }
    return result;
  }

  /** `self & other`: CPython iterates the smaller set (the argument on a tie), adding common keys to a new set. */
  intersection(other: PythonSet<K>): PythonSet<K> {
    const [big, small] = other.used > this.used ? [other, this as PythonSet<K>] : [this as PythonSet<K>, other];
    const result = new PythonSet<K>();
    for (const entry of small.table) {
      if (entry !== undefined && entry !== DUMMY && big.findIndex(entry.key, entry.hash) >= 0) result.addEntry(entry.key, entry.hash);
    }
    return result;
  }

  /** `set(s)`: CPython's `set_merge` into an empty set (one resize up front, then clean insertions or a slot copy). */
  copy(): PythonSet<K> {
    const result = new PythonSet<K>();
    if (this.used === 0) return result;
    if (this.used * 5 >= result.mask * 3) result.resize(this.used * 2);
    if (result.mask === this.mask && this.fill === this.used) {
      result.table = this.table.slice();
    } else {
      for (const entry of this.table) {
        if (entry !== undefined && entry !== DUMMY) insertClean(result.table, result.mask, entry);
      }
    }
    result.fill = this.used;
    result.used = this.used;
    return result;
  }

  private findIndex(key: K, hash: bigint): number {
    const mask = this.mask;
    let i = Number(hash & BigInt(mask));
    let perturb = hash;
    for (;;) {
      let probes = i + LINEAR_PROBES <= mask ? LINEAR_PROBES : 0;
      let j = i;
      for (;;) {
        const entry = this.table[j];
        if (entry === undefined) return -1;
        if (entry !== DUMMY && entry.hash === hash && sameKey(entry.key, key)) return j;
        if (probes-- === 0) break;
        j++;
      }
      perturb >>= PERTURB_SHIFT;
      i = nextProbe(i, perturb, mask);
    }
  }

  private addEntry(key: K, hash: bigint): void {
    const mask = this.mask;
    let i = Number(hash & BigInt(mask));
    let perturb = hash;
    let freeSlot = -1;
    for (;;) {
      let probes = i + LINEAR_PROBES <= mask ? LINEAR_PROBES : 0;
      let j = i;
      for (;;) {
        const entry = this.table[j];
        if (entry === undefined) {
          if (freeSlot >= 0) {
            this.table[freeSlot] = { key, hash };
            this.used++;
            return;
          }
          this.table[j] = { key, hash };
          this.fill++;
          this.used++;
          if (this.fill * 5 >= mask * 3) this.resize(this.used > 50000 ? this.used * 2 : this.used * 4);
          return;
        }
        if (entry === DUMMY) {
          if (freeSlot < 0) freeSlot = j;
        } else if (entry.hash === hash && sameKey(entry.key, key)) {
          return;
        }
        if (probes-- === 0) break;
        j++;
      }
      perturb >>= PERTURB_SHIFT;
      i = nextProbe(i, perturb, mask);
    }
  }

  private resize(minUsed: number): void {
    let size = MIN_SIZE;
    while (size <= minUsed) size *= 2;
    const old = this.table;
    this.table = new Array(size);
    this.mask = size - 1;
    for (const entry of old) if (entry !== undefined && entry !== DUMMY) insertClean(this.table, this.mask, entry);
    this.fill = this.used;
  }
}

/** `i = (i * 5 + 1 + perturb) & mask` in size_t arithmetic; only the low bits of `perturb` matter under the mask. */
function nextProbe(i: number, perturb: bigint, mask: number): number {
  return Number((BigInt(i) * 5n + 1n + perturb) & BigInt(mask));
}

/** CPython's `set_insert_clean`: insertion into a table known to hold neither the key nor dummies. */
function insertClean<K>(table: TableEntry<K>[], mask: number, slot: Slot<K>): void {
  let i = Number(slot.hash & BigInt(mask));
  let perturb = slot.hash;
  for (;;) {
    if (table[i] === undefined) {
      table[i] = slot;
      return;
    }
    if (i + LINEAR_PROBES <= mask) {
      for (let j = 1; j <= LINEAR_PROBES; j++) {
        if (table[i + j] === undefined) {
          table[i + j] = slot;
          return;
        }
      }
    }
    perturb >>= PERTURB_SHIFT;
    i = nextProbe(i, perturb, mask);
  }
}
