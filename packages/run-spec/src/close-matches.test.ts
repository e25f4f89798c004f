import { describe, expect, it } from 'vitest';
import { closeMatches } from './close-matches.js';
import { CANONICAL_RUN_SPEC_FUNCS } from './canonical-run-spec-functions.js';

describe('closeMatches', () => {
  it('finds names within 3 edits or sharing a prefix, best first', () => {
    expect(closeMatches('mmlux', CANONICAL_RUN_SPEC_FUNCS.keys())[0]).toBe('mmlu');
    expect(closeMatches('bolq', ['boolq', 'imdb', 'gsm'])).toEqual(['boolq']);
    expect(closeMatches('summarization', CANONICAL_RUN_SPEC_FUNCS.keys())).toEqual(['summarization_xsum', 'summarization_xsum_sampled', 'summarization_cnndm']);
    expect(closeMatches('', ['a'])).toEqual([]);
  });

  it('gives no suggestion for a name far longer than any candidate', () => {
    expect(closeMatches('mmlu'.repeat(100), CANONICAL_RUN_SPEC_FUNCS.keys())).toEqual([]);
  });
});
