import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIAS_WORD_LISTS_URL, loadBiasWordLists } from './bias-word-lists.js';

// A small file in the shape of HELM's bias_word_lists.py (our own words, not HELM's lists).
const SOURCE = [
  'FEMALE_WORDS: List[str] = [\n    "she",\n]',
  'MALE_WORDS: List[str] = [\n    "he",\n]',
  'GENDER_TO_WORD_LISTS: Dict[str, List[str]] = {\n    "female": FEMALE_WORDS,\n    "male": MALE_WORDS,\n}',
  'ASIAN_NAMES: List[str] = [\n    "wei",\n]',
  'WHITE_NAMES: List[str] = [\n    "john",\n]',
  'RACE_TO_NAME_LISTS: Dict[str, List[str]] = {\n    "asian": ASIAN_NAMES,\n    "white": WHITE_NAMES,\n}',
  'ADJECTIVE_LIST: List[str] = [\n    "kind",\n]',
  'PROFESSION_LIST: List[str] = [\n    "nurse",\n]',
].join('\n\n');

describe('loadBiasWordLists', () => {
  it('reads them from a HELM checkout named by FLEXHELM_HELM_SOURCE_DIR', async () => {
    const helm = mkdtempSync(join(tmpdir(), 'helm-src-'));
    mkdirSync(join(helm, 'src/helm/benchmark/metrics'), { recursive: true });
    writeFileSync(join(helm, 'src/helm/benchmark/metrics/bias_word_lists.py'), SOURCE);
    const lists = await loadBiasWordLists({ dataDir: join(helm, 'data'), offline: true, env: { FLEXHELM_HELM_SOURCE_DIR: helm } });
    expect('unavailable' in lists).toBe(false);
    if (!('unavailable' in lists)) {
      expect(lists.gender.get('female')).toEqual(['she']);
      expect(lists.professions).toEqual(['nurse']);
    }
  });

  it('says why when they cannot be had, without failing the run', async () => {
    const result = await loadBiasWordLists({ dataDir: mkdtempSync(join(tmpdir(), 'bias-')), offline: true, env: {} });
    expect(result).toEqual({ unavailable: expect.stringContaining(BIAS_WORD_LISTS_URL) });
  });
});
