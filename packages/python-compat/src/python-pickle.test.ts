import { describe, expect, it } from 'vitest';
import { loadPickle } from './python-pickle.js';

// pickle.dumps(obj, protocol=p) from Python 3.11 for
// obj = {"train": [{"document": "Café 😀 text\nwith newline", "summary": "s"}],
//        "n": [1, -1, 255, 256, 65536, -2**31, 2**40, -2**70, 1.5, True, False, None], "t": (1, (2, 3), ()),
//        "shared": [lst, lst]}  with lst = [1, 2]   (protocols 4 and 5 also hold "b": b"\x00\xff" and "set": {1})
const P0 =
  'KGRwMApWdHJhaW4KcDEKKGxwMgooZHAzClZkb2N1bWVudApwNApWQ2Fm6SBcVTAwMDFmNjAwIHRleHRcdTAwMGF3aXRoIG5ld2xpbmUKcDUKc1ZzdW1tYXJ5CnA2ClZzCnA3CnNhc1ZuCnA4CihscDkKSTEKYUktMQphSTI1NQphSTI1NgphSTY1NTM2CmFJLTIxNDc0ODM2NDgKYUwxMDk5NTExNjI3Nzc2TAphTC0xMTgwNTkxNjIwNzE3NDExMzAzNDI0TAphRjEuNQphSTAxCmFJMDAKYU5hc1Z0CnAxMAooSTEKKEkyCkkzCnRwMTEKKHR0cDEyCnNWc2hhcmVkCnAxMwoobHAxNAoobHAxNQpJMQphSTIKYWFnMTUKYXMu';
const P2 =
  'gAJ9cQAoWAUAAAB0cmFpbnEBXXECfXEDKFgIAAAAZG9jdW1lbnRxBFgcAAAAQ2Fmw6kg8J+YgCB0ZXh0CndpdGggbmV3bGluZXEFWAcAAABzdW1tYXJ5cQZYAQAAAHNxB3VhWAEAAABucQhdcQkoSwFK/////0v/TQABSgAAAQBKAAAAgIoGAAAAAAABigkAAAAAAAAAAMBHP/gAAAAAAACIiU5lWAEAAAB0cQpLAUsCSwOGcQsph3EMWAYAAABzaGFyZWRxDV1xDihdcQ8oSwFLAmVoD2V1Lg==';
const P4 =
  'gASVxAAAAAAAAAB9lCiMBXRyYWlulF2UfZQojAhkb2N1bWVudJSMHENhZsOpIPCfmIAgdGV4dAp3aXRoIG5ld2xpbmWUjAdzdW1tYXJ5lIwBc5R1YYwBbpRdlChLAUr/////S/9NAAFKAAABAEoAAACAigYAAAAAAAGKCQAAAAAAAAAAwEc/+AAAAAAAAIiJTmWMAXSUSwFLAksDhpQph5SMAWKUQwIA/5SMA3NldJSPlChLAZCMBnNoYXJlZJRdlChdlChLAUsCZWgTZXUu';
const P5 =
  'gAWVxAAAAAAAAAB9lCiMBXRyYWlulF2UfZQojAhkb2N1bWVudJSMHENhZsOpIPCfmIAgdGV4dAp3aXRoIG5ld2xpbmWUjAdzdW1tYXJ5lIwBc5R1YYwBbpRdlChLAUr/////S/9NAAFKAAABAEoAAACAigYAAAAAAAGKCQAAAAAAAAAAwEc/+AAAAAAAAIiJTmWMAXSUSwFLAksDhpQph5SMAWKUQwIA/5SMA3NldJSPlChLAZCMBnNoYXJlZJRdlChdlChLAUsCZWgTZXUu';

const load = (b64: string) => loadPickle(Buffer.from(b64, 'base64'));

describe('loadPickle', () => {
  it.each([
    ['0', P0],
    ['2', P2],
    ['4', P4],
    ['5', P5],
  ])('reads protocol %s', (_, b64) => {
    const value = load(b64) as Map<string, unknown>;
    expect(value).toBeInstanceOf(Map);
    const train = value.get('train') as Map<string, string>[];
    expect(train[0]!.get('document')).toBe('Café 😀 text\nwith newline');
    expect(train[0]!.get('summary')).toBe('s');
    expect(value.get('n')).toEqual([1, -1, 255, 256, 65536, -(2 ** 31), 2 ** 40, -(2n ** 70n), 1.5, true, false, null]);
    expect(value.get('t')).toEqual([1, [2, 3], []]);
    const shared = value.get('shared') as unknown[][];
    expect(shared[0]).toBe(shared[1]); // memoised: the same list twice, as in Python
  });

  it('reads bytes and sets (protocol 4)', () => {
    const value = load(P4) as Map<string, unknown>;
    expect(value.get('b')).toEqual(Uint8Array.from([0, 255]));
    expect(value.get('set')).toEqual(new Set([1]));
  });

  it('reads an OrderedDict as a dict, refuses other classes, and reports truncation', () => {
    // pickle.dumps(collections.OrderedDict([("a", 1)]), protocol=2)
    expect(load('gAJjY29sbGVjdGlvbnMKT3JkZXJlZERpY3QKcQApUnEBWAEAAABhcQJLAXMu')).toEqual(new Map([['a', 1]]));
    // pickle.dumps(datetime.date(2020, 1, 1), protocol=4)
    expect(() => load('gASVIAAAAAAAAACMCGRhdGV0aW1llIwEZGF0ZZSTlEMEB+QBAZSFlFKULg==')).toThrow(/refers to datetime.date/);
    expect(() => loadPickle(Buffer.from(P4, 'base64').subarray(0, 60))).toThrow(/truncated|ends early/);
  });

  it('refuses an OrderedDict item that is not a pair', () => {
    // A class whose __reduce__ gives (OrderedDict, ([('a',)],)): Python raises "dictionary update sequence element #0 has length 1".
    expect(() => load('gAJjY29sbGVjdGlvbnMKT3JkZXJlZERpY3QKcQBdcQFYAQAAAGFxAoVxA2GFcQRScQUu')).toThrow('malformed pickle: OrderedDict item #0 has length 1; 2 is required');
  });
});
