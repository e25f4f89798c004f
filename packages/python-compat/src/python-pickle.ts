/**
 * A reader for Python pickles of plain data (what HELM's data files hold: dicts, lists, tuples, str, bytes, int,
 * float, bool, None, sets), protocols 0–5. It never runs code: a pickle that refers to a class or function (other
 * than `collections.OrderedDict`, read as a dict) is refused. Dicts become `Map`s (key order and non-string keys
 * kept), tuples and lists arrays, sets `Set`s, ints `number` (or `bigint` beyond 2**53), bytes `Uint8Array`.
 */
export type PickleValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PickleValue[]
  | Map<PickleValue, PickleValue>
  | Set<PickleValue>;

const MARK = Symbol('mark');
const ORDERED_DICT = Symbol('collections.OrderedDict');
type StackItem = PickleValue | typeof MARK | typeof ORDERED_DICT;

export class PickleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PickleError';
  }
}

export function loadPickle(data: Uint8Array): PickleValue {
  const buf = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let pos = 0;
  const stack: StackItem[] = [];
  const memo = new Map<number, StackItem>();

  const need = (n: number) => {
    if (pos + n > buf.length) throw new PickleError(`pickle data ends early (needed ${n} bytes at offset ${pos}); the file is truncated`);
  };
  const u8 = () => {
    need(1);
    return buf[pos++]!;
  };
  const u16 = () => {
    need(2);
    pos += 2;
    return buf.readUInt16LE(pos - 2);
  };
  const u32 = () => {
    need(4);
    pos += 4;
    return buf.readUInt32LE(pos - 4);
  };
  const i32 = () => {
    need(4);
    pos += 4;
    return buf.readInt32LE(pos - 4);
  };
  const u64 = () => {
    need(8);
    const value = buf.readBigUInt64LE(pos);
    pos += 8;
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new PickleError('pickle item too large');
    return Number(value);
  };
  const bytes = (n: number) => {
    need(n);
    pos += n;
    return buf.subarray(pos - n, pos);
  };
  const line = () => {
    const end = buf.indexOf(0x0a, pos);
    if (end < 0) throw new PickleError('pickle data ends inside a text line; the file is truncated');
    const text = buf.toString('latin1', pos, end);
    pos = end + 1;
    return text;
  };
  const pop = (): PickleValue => {
    const value = stack.pop();
    if (value === undefined || value === MARK || value === ORDERED_DICT) throw new PickleError('malformed pickle: stack underflow');
    return value;
  };
  const top = (): PickleValue => {
    const value = stack[stack.length - 1];
    if (value === undefined || value === MARK || value === ORDERED_DICT) throw new PickleError('malformed pickle: no object to update');
    return value;
  };
  // What memo opcodes store: any object, including a not-yet-called OrderedDict class.
  const peek = (): StackItem => {
    const value = stack[stack.length - 1];
    if (value === undefined || value === MARK) throw new PickleError('malformed pickle: nothing to memoise');
    return value;
  };
  const popMark = (): PickleValue[] => {
    const at = stack.lastIndexOf(MARK);
    if (at < 0) throw new PickleError('malformed pickle: missing MARK');
    const items = stack.splice(at) as PickleValue[];
    items.shift();
    return items;
  };
  const setItems = (target: PickleValue, items: PickleValue[]) => {
    if (!(target instanceof Map)) throw new PickleError('malformed pickle: SETITEM on a non-dict');
    for (let i = 0; i + 1 < items.length; i += 2) target.set(dictKey(items[i]!), items[i + 1]!);
  };
  const appendItems = (target: PickleValue, items: PickleValue[]) => {
    if (!Array.isArray(target)) throw new PickleError('malformed pickle: APPEND on a non-list');
    for (const item of items) target.push(item);
  };
  const int = (value: bigint): number | bigint => (value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value);
  const utf8 = (b: Buffer) => b.toString('utf8');

  for (;;) {
    const op = u8();
    switch (op) {
      case 0x80: // PROTO
        u8();
        break;
      case 0x95: // FRAME
        u64();
        break;
      case 0x2e: // STOP
        if (stack.length !== 1) throw new PickleError(`malformed pickle: STOP with a stack of ${stack.length}`);
        return pop();
      case 0x28: // MARK
        stack.push(MARK);
        break;
      case 0x7d: // EMPTY_DICT
        stack.push(new Map());
        break;
      case 0x5d: // EMPTY_LIST
        stack.push([]);
        break;
      case 0x29: // EMPTY_TUPLE
        stack.push([]);
        break;
      case 0x8f: // EMPTY_SET
        stack.push(new Set());
        break;
      case 0x64: {
        // DICT
        const map = new Map<PickleValue, PickleValue>();
        setItems(map, popMark());
        stack.push(map);
        break;
      }
      case 0x6c: // LIST
      case 0x74: // TUPLE
        stack.push(popMark());
        break;
      case 0x85: // TUPLE1
        stack.push([pop()]);
        break;
      case 0x86: {
        // TUPLE2
        const b = pop();
        stack.push([pop(), b]);
        break;
      }
      case 0x87: {
        // TUPLE3
        const c = pop();
        const b = pop();
        stack.push([pop(), b, c]);
        break;
      }
      case 0x91: // FROZENSET
        stack.push(new Set(popMark()));
        break;
      case 0x90: {
        // ADDITEMS
        const items = popMark();
        const target = top();
        if (!(target instanceof Set)) throw new PickleError('malformed pickle: ADDITEMS on a non-set');
        for (const item of items) target.add(item);
        break;
      }
      case 0x73: {
        // SETITEM
        const value = pop();
        const key = pop();
        setItems(top(), [key, value]);
        break;
      }
      case 0x75: {
        // SETITEMS
        const items = popMark();
        setItems(top(), items);
        break;
      }
      case 0x61: {
        // APPEND
        const value = pop();
        appendItems(top(), [value]);
        break;
      }
      case 0x65: {
        // APPENDS
        const items = popMark();
        appendItems(top(), items);
        break;
      }
      case 0x4e: // NONE
        stack.push(null);
        break;
      case 0x88: // NEWTRUE
        stack.push(true);
        break;
      case 0x89: // NEWFALSE
        stack.push(false);
        break;
      case 0x4b: // BININT1
        stack.push(u8());
        break;
      case 0x4d: // BININT2
        stack.push(u16());
        break;
      case 0x4a: // BININT
        stack.push(i32());
        break;
      case 0x8a: // LONG1
        stack.push(int(littleEndianSigned(bytes(u8()))));
        break;
      case 0x8b: // LONG4
        stack.push(int(littleEndianSigned(bytes(u32()))));
        break;
      case 0x49: {
        // INT (protocol 0; "01"/"00" are True/False)
        const text = line().trim();
        stack.push(text === '01' ? true : text === '00' ? false : int(BigInt(text)));
        break;
      }
      case 0x4c: // LONG (protocol 0)
        stack.push(int(BigInt(line().trim().replace(/L$/, ''))));
        break;
      case 0x47: // BINFLOAT
        need(8);
        stack.push(buf.readDoubleBE(pos));
        pos += 8;
        break;
      case 0x46: // FLOAT
        stack.push(Number(line()));
        break;
      case 0x8c: // SHORT_BINUNICODE
        stack.push(utf8(bytes(u8())));
        break;
      case 0x58: // BINUNICODE
        stack.push(utf8(bytes(u32())));
        break;
      case 0x8d: // BINUNICODE8
        stack.push(utf8(bytes(u64())));
        break;
      case 0x56: // UNICODE (protocol 0: raw-unicode-escape)
        stack.push(rawUnicodeEscape(line()));
        break;
      case 0x55: // SHORT_BINSTRING (Python 2 str, read as latin-1 like pickle's default encoding="ASCII" would fail on >127)
        stack.push(bytes(u8()).toString('latin1'));
        break;
      case 0x54: // BINSTRING
        stack.push(bytes(i32()).toString('latin1'));
        break;
      case 0x43: // SHORT_BINBYTES
        stack.push(Uint8Array.from(bytes(u8())));
        break;
      case 0x42: // BINBYTES
        stack.push(Uint8Array.from(bytes(u32())));
        break;
      case 0x8e: // BINBYTES8
      case 0x96: // BYTEARRAY8
        stack.push(Uint8Array.from(bytes(u64())));
        break;
      case 0x94: // MEMOIZE
        memo.set(memo.size, peek());
        break;
      case 0x71: // BINPUT
        memo.set(u8(), peek());
        break;
      case 0x72: // LONG_BINPUT
        memo.set(u32(), peek());
        break;
      case 0x70: // PUT
        memo.set(Number(line()), peek());
        break;
      case 0x68: // BINGET
      case 0x6a: // LONG_BINGET
      case 0x67: {
        // GET
        const index = op === 0x68 ? u8() : op === 0x6a ? u32() : Number(line());
        if (!memo.has(index)) throw new PickleError(`malformed pickle: memo entry ${index} missing`);
        stack.push(memo.get(index)!);
        break;
      }
      case 0x63: {
        // GLOBAL
        const name = `${line()}.${line()}`;
        if (name !== 'collections.OrderedDict') throw refusal(name);
        stack.push(ORDERED_DICT);
        break;
      }
      case 0x93: {
        // STACK_GLOBAL
        const attr = pop();
        const module = pop();
        const name = `${String(module)}.${String(attr)}`;
        if (name !== 'collections.OrderedDict') throw refusal(name);
        stack.push(ORDERED_DICT);
        break;
      }
      case 0x52: {
        // REDUCE: only OrderedDict() / OrderedDict([pairs]) is allowed
        const args = pop();
        const callable = stack.pop();
        if (callable !== ORDERED_DICT || !Array.isArray(args)) throw new PickleError('pickle calls a function, which this reader refuses');
        const map = new Map<PickleValue, PickleValue>();
        const pairs = args[0];
        if (Array.isArray(pairs)) {
          for (const [n, pair] of pairs.entries()) {
            if (!Array.isArray(pair)) continue;
            if (pair.length !== 2) throw new PickleError(`malformed pickle: OrderedDict item #${n} has length ${pair.length}; 2 is required`);
            map.set(dictKey(pair[0]!), pair[1]!);
          }
        }
        stack.push(map);
        break;
      }
      default:
        throw new PickleError(`unsupported pickle opcode 0x${op.toString(16)} at offset ${pos - 1}`);
    }
  }
}

/** Dict keys are compared by value in Python; primitives already are in a Map, so only those are allowed. */
function dictKey(key: PickleValue): PickleValue {
  if (key !== null && typeof key === 'object') throw new PickleError('pickle dict with a tuple/bytes key is not supported');
  return key;
}

function refusal(name: string): PickleError {
  return new PickleError(`pickle refers to ${name}; only plain data (dict, list, str, numbers…) can be read without running code`);
}

function littleEndianSigned(b: Buffer): bigint {
  if (b.length === 0) return 0n;
  let value = 0n;
  for (let i = b.length - 1; i >= 0; i--) value = (value << 8n) | BigInt(b[i]!);
  if (b[b.length - 1]! & 0x80) value -= 1n << BigInt(8 * b.length);
  return value;
}

/** Python's `raw-unicode-escape` decoding: only `\uXXXX` and `\UXXXXXXXX` are escapes; other bytes are Latin-1. */
function rawUnicodeEscape(text: string): string {
  return text.replace(/\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})/g, (_, short: string | undefined, long: string | undefined) =>
    String.fromCodePoint(parseInt((short ?? long)!, 16)),
  );
}
