import { npExp, pyExp, pyJsonParse, type PyJsonValue, type PyNumber, toNumber } from '@flexhelm/python-compat';
import { readFileSync, existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { REFERENCE_METRIC_FUNCTIONS } from './basic-metric.js';
import { bleu1, bleu4 } from './bleu.js';
import { mathEquiv } from './math-equiv.js';
import { normalizeText } from './normalize-text.js';
import { porterStem } from './porter-stemmer.js';
import { rougeTokenize } from './rouge.js';
import { sentTokenize } from './punkt-sentence-tokenizer.js';
import { wordTokenize } from './word-tokenize.js';

const GOLDEN = new URL('../../../../shared/conformance/helm/metrics.json', import.meta.url);

describe('score functions', () => {
  it('stems like NLTK PorterStemmer (NLTK_EXTENSIONS)', () => {
    const cases: [string, string][] = [
      ['caresses', 'caress'], ['ponies', 'poni'], ['ties', 'tie'], ['running', 'run'], ['quickly', 'quickli'],
      ['relational', 'relat'], ['hopefulness', 'hope'], ['generalization', 'gener'], ['dying', 'die'], ['skies', 'sky'],
      ['happy', 'happi'], ['enjoy', 'enjoy'], ['controlling', 'control'], ['agreed', 'agre'], ['fly', 'fli'],
    ];
    for (const [word, stem] of cases) expect(porterStem(word), word).toBe(stem);
    expect(rougeTokenize('The quick brown dog jumps on the log.')).toEqual(['the', 'quick', 'brown', 'dog', 'jump', 'on', 'the', 'log']);
  });

  it('tokenizes like nltk.word_tokenize', () => {
    expect(wordTokenize("Good muffins cost $3.88 (roughly 3,36 euros)\nin New York.  Please buy me\ntwo of them.\nThanks.")).toEqual([
      'Good', 'muffins', 'cost', '$', '3.88', '(', 'roughly', '3,36', 'euros', ')', 'in', 'New', 'York', '.', 'Please', 'buy', 'me', 'two', 'of', 'them', '.', 'Thanks', '.',
    ]);
    expect(wordTokenize("They'll say \"can't\" isn't fine.")).toEqual(['They', "'ll", 'say', '``', 'ca', "n't", "''", 'is', "n't", 'fine', '.']);
    expect(sentTokenize('Mr. Smith went home. He slept! Did he?')).toEqual(['Mr.', 'Smith went home.', 'He slept!', 'Did he?']);
  });

  it('computes BLEU with method0 smoothing and math_equiv normalisation', () => {
    expect(bleu1('the cat sat on the mat', 'the cat')).toBe(0.1353352832366127);
    expect(toNumber(bleu4('one two three four five', 'five four three two one'))).toBe(2.2250738585072626e-308);
    expect(bleu1('Paris', '')).toBe(0);
    expect(toNumber(mathEquiv('\\frac12', '\\frac{1}{2}'))).toBe(1);
    expect(toNumber(mathEquiv('0.5', '.5'))).toBe(1);
    expect(toNumber(mathEquiv('2 \\text{ cm}', '2'))).toBe(1);
  });

  it('rounds exp correctly where V8 does not, and reproduces numpy 1.24 (SVML) np.exp', () => {
    expect(pyExp(-0.25)).toBe(0.7788007830714049);
    expect(pyExp(-1.5)).toBe(0.22313016014842982);
    expect(pyExp(-3)).toBe(0.049787068367863944);
    // Values printed by Debian bookworm's python3-numpy 1.24.2 on an AVX-512 machine.
    expect(npExp(-3)).toBe(0.04978706836786394);
    expect(npExp(-11.244129849265878)).toBe(0.0000130838769981854);
    expect(npExp(-27.970037632885262)).toBe(7.124706811446063e-13);
    expect(npExp(-9.944092090291562)).toBe(0.00004801043905969235);
  });

  it.runIf(existsSync(GOLDEN) || !!process.env.CI)('matches every pair of the HELM 0.2.1 golden file', () => {
    const golden = pyJsonParse(readFileSync(GOLDEN, 'utf8')) as Map<string, PyJsonValue>;
    for (const c of golden.get('normalize_text') as Map<string, PyJsonValue>[]) expect(normalizeText(c.get('text') as string)).toBe(c.get('normalize_text'));
    let n = 0;
    for (const c of golden.get('pairs') as Map<string, PyJsonValue>[]) {
      for (const [metric, expected] of c.get('values') as Map<string, PyJsonValue>) {
        const fn = metric === 'math_equiv' ? (g: string, p: string) => mathEquiv(g, p) : REFERENCE_METRIC_FUNCTIONS[metric];
        expect(toNumber(fn!(c.get('gold') as string, c.get('pred') as string)), `${metric} ${String(c.get('note'))}`).toBe(toNumber(expected as PyNumber));
        n++;
      }
    }
    expect(n).toBeGreaterThan(400);
  });
});
