import { describe, expect, it } from 'vitest';
import { PendingText, releasable } from './pending-text.js';

/** A seeded generator (mulberry32), so a failing case can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('releasable', () => {
  it('holds a trailing U+FFFD, the longest suffix that may grow into a stop, and cuts before a whole stop', () => {
    expect(releasable('caf\uFFFD', [])).toBe('caf');
    expect(releasable('hello wor', ['world', 'or'])).toBe('hello w');
    expect(releasable('hello world!', ['world'])).toBe('hello ');
    expect(releasable('abab', ['abac'])).toBe('ab');
    expect(releasable('x😀', ['\uDE00z'])).toBe('x'); // never half a surrogate pair
  });
});

describe('PendingText', () => {
  it('sends, for 500 random stop sets, exactly the text the whole answer keeps, never a piece of a stop', () => {
    const next = random(42);
    const alphabet = ['a', 'b', 'ab', 'ba', ' ', 'c', 'é', '\n', 'abc'];
    for (let trial = 0; trial < 500; trial++) {
      const pieces = Array.from({ length: 30 }, () => alphabet[Math.floor(next() * alphabet.length)]!);
      const text = (ids: number[]) => ids.map((i) => pieces[i]).join('');
      const stops = Array.from({ length: 1 + Math.floor(next() * 3) }, () => {
        const len = 1 + Math.floor(next() * 4);
        return Array.from({ length: len }, () => 'abc é'[Math.floor(next() * 5)]).join('');
      });
      const pending = new PendingText(text, stops);
      const generated: number[] = [];
      let streamed = '';
      // Token by token, as the engine does: it stops once the text holds a stop sequence.
      for (let i = 0; i < pieces.length; i++) {
        generated.push(i);
        streamed += pending.push([i]);
        if (stops.some((s) => text(generated).includes(s))) break;
      }
      const full = text(generated);
      const cut = Math.min(...stops.map((s) => full.indexOf(s)).filter((x) => x >= 0));
      const answer = Number.isFinite(cut) ? full.slice(0, cut) : full;
      expect(answer.startsWith(streamed), `${JSON.stringify(stops)} ${JSON.stringify(full)}`).toBe(true);
      expect(streamed).toBe(pending.sent);
      if (Number.isFinite(cut)) expect(streamed).toBe(answer);
    }
  });

  it('leaves hidden tokens (end of turn) out, and holds the bytes of an unfinished character', () => {
    const bytes = [Buffer.from('ok '), Buffer.from([0xe2, 0x82]), Buffer.from([0xac]), Buffer.from('<eot>')];
    const decoder = (ids: number[]) => new TextDecoder().decode(Buffer.concat(ids.map((i) => bytes[i]!)));
    const p = new PendingText(decoder, [], new Set([3]));
    expect(p.push([0])).toBe('ok ');
    expect(p.push([1])).toBe('');
    expect(p.push([2])).toBe('€');
    expect(p.push([3])).toBe('');
    expect(p.sent).toBe('ok €');
  });
});
