/**
 * CPython 3.11's `set` iteration order for str keys under `PYTHONHASHSEED=0` (the setting HELM's golden data uses):
 * SipHash-1-3 string hashes with a zero key, and the open-addressing table of `Objects/setobject.c` (linear probes of
 * 9, perturbed probing, resize at 3/5 full). HELM builds the `ablation*` model families from sets, so their order is
 * this one.
 */

const MASK64 = (1n << 64n) - 1n;
const rotl = (x: bigint, b: bigint) => ((x << b) | (x >> (64n - b))) & MASK64;

/** SipHash-1-3 of `bytes` with key (k0, k1), as CPython's `Python/pyhash.c`. */
function siphash13(bytes: Uint8Array, k0 = 0n, k1 = 0n): bigint {
  let v0 = k0 ^ 0x736f6d6570736575n;
  let v1 = k1 ^ 0x646f72616e646f6dn;
  let v2 = k0 ^ 0x6c7967656e657261n;
  let v3 = k1 ^ 0x7465646279746573n;
  const round = () => {
    v0 = (v0 + v1) & MASK64; v1 = rotl(v1, 13n); v1 ^= v0; v0 = rotl(v0, 32n);
    v2 = (v2 + v3) & MASK64; v3 = rotl(v3, 16n); v3 ^= v2;
    v0 = (v0 + v3) & MASK64; v3 = rotl(v3, 21n); v3 ^= v0;
    v2 = (v2 + v1) & MASK64; v1 = rotl(v1, 17n); v1 ^= v2; v2 = rotl(v2, 32n);
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
  return (v0 ^ v1 ^ v2 ^ v3) & MASK64;
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
  return h === MASK64 ? MASK64 - 1n : h;
}

const LINEAR_PROBES = 9;
const PERTURB_SHIFT = 5n;

/** A CPython set of str keys: same table layout, hence the same iteration order. */
export class PythonStrSet {
  private table: ({ key: string; hash: bigint } | undefined)[] = new Array(8).fill(undefined);
  private used = 0;

  constructor(items: Iterable<string> = []) {
    for (const item of items) this.add(item);
  }

  get size(): number {
    return this.used;
  }

  has(key: string): boolean {
    return this.table.some((e) => e?.key === key);
  }

  /** `set_add_entry` (there are never dummies: nothing is removed). */
  add(key: string, hash = pyStrHash(key)): void {
    const mask = this.table.length - 1;
    let i = Number(hash & BigInt(mask));
    let perturb = hash;
    for (;;) {
      const probes = i + LINEAR_PROBES <= mask ? LINEAR_PROBES : 0;
      for (let j = 0; j <= probes; j++) {
        const entry = this.table[i + j];
        if (entry === undefined) {
          this.table[i + j] = { key, hash };
          this.used++;
          if (this.used * 5 >= mask * 3) this.resize(this.used > 50000 ? this.used * 2 : this.used * 4);
          return;
        }
        if (entry.hash === hash && entry.key === key) return;
      }
      perturb >>= PERTURB_SHIFT;
      i = Number((BigInt(i) * 5n + 1n + perturb) & BigInt(mask));
    }
  }

  private resize(minUsed: number): void {
    let size = 8;
    while (size <= minUsed) size <<= 1;
    const old = this.table;
    this.table = new Array(size).fill(undefined);
    const mask = size - 1;
    for (const entry of old) {
      if (!entry) continue;
      // set_insert_clean: the first empty slot along the probe sequence.
      let i = Number(entry.hash & BigInt(mask));
      let perturb = entry.hash;
      for (;;) {
        const probes = i + LINEAR_PROBES <= mask ? LINEAR_PROBES : 0;
        const free = Array.from({ length: probes + 1 }, (_, j) => i + j).find((k) => this.table[k] === undefined);
        if (free !== undefined) {
          this.table[free] = entry;
          break;
        }
        perturb >>= PERTURB_SHIFT;
        i = Number((BigInt(i) * 5n + 1n + perturb) & BigInt(mask));
      }
    }
  }

  /** `a & b`: iterates the smaller set (the argument on a tie) and adds the common keys to a new set. */
  intersection(other: PythonStrSet): PythonStrSet {
    const [big, small] = other.size > this.size ? [other, this as PythonStrSet] : [this as PythonStrSet, other];
    const result = new PythonStrSet();
    for (const entry of small.table) if (entry && big.has(entry.key)) result.add(entry.key, entry.hash);
    return result;
  }

  /** Iteration order (`list(s)`). */
  values(): string[] {
    return this.table.filter((e) => e !== undefined).map((e) => e!.key);
  }
}
