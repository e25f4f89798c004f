/**
 * NLTK 3.8's `PorterStemmer()` in its default NLTK_EXTENSIONS mode — the stemmer rouge-score uses with
 * `use_stemmer=True`. Rules and their order follow Porter (1980) plus the NLTK deviations, so stems match NLTK's.
 */

type Condition = ((stem: string) => boolean) | null;
type Rule = [suffix: string, replacement: string, condition: Condition];

const IRREGULAR_FORMS: Record<string, string[]> = {
  sky: ['sky', 'skies'],
  die: ['dying'],
  lie: ['lying'],
  tie: ['tying'],
  news: ['news'],
  inning: ['innings', 'inning'],
  outing: ['outings', 'outing'],
  canning: ['cannings', 'canning'],
  howe: ['howe'],
  proceed: ['proceed'],
  exceed: ['exceed'],
  succeed: ['succeed'],
};

const POOL = new Map<string, string>();
for (const [stem, forms] of Object.entries(IRREGULAR_FORMS)) for (const form of forms) POOL.set(form, stem);

const VOWELS = new Set(['a', 'e', 'i', 'o', 'u']);

function isConsonant(word: string, i: number): boolean {
  const ch = word[i]!; // callers pass 0 ≤ i < word.length
  if (VOWELS.has(ch)) return false;
  if (ch === 'y') return i === 0 ? true : !isConsonant(word, i - 1);
  return true;
}

/** Porter's m: the number of VC sequences in [C](VC)^m[V]. */
function measure(stem: string): number {
  let cv = '';
  for (let i = 0; i < stem.length; i++) cv += isConsonant(stem, i) ? 'c' : 'v';
  return cv.split('vc').length - 1;
}

const positiveMeasure = (stem: string) => measure(stem) > 0;

function containsVowel(stem: string): boolean {
  for (let i = 0; i < stem.length; i++) if (!isConsonant(stem, i)) return true;
  return false;
}

function endsDoubleConsonant(word: string): boolean {
  return word.length >= 2 && word.at(-1) === word.at(-2) && isConsonant(word, word.length - 1);
}

/** *o: ends consonant-vowel-consonant, the last not w/x/y (NLTK also accepts a two-letter vowel-consonant word). */
function endsCvc(word: string): boolean {
  const n = word.length;
  return (
    (n >= 3 && isConsonant(word, n - 3) && !isConsonant(word, n - 2) && isConsonant(word, n - 1) && !['w', 'x', 'y'].includes(word[n - 1]!)) ||
    (n === 2 && !isConsonant(word, 0) && isConsonant(word, 1))
  );
}

function replaceSuffix(word: string, suffix: string, replacement: string): string {
  return suffix === '' ? word + replacement : word.slice(0, word.length - suffix.length) + replacement;
}

/** The first rule whose suffix matches decides: applied if its condition holds, otherwise the word is kept. */
function applyRuleList(word: string, rules: Rule[]): string {
  for (const [suffix, replacement, condition] of rules) {
    if (suffix === '*d' && endsDoubleConsonant(word)) {
      const stem = word.slice(0, -2);
      return condition === null || condition(stem) ? stem + replacement : word;
    }
    if (word.endsWith(suffix)) {
      const stem = replaceSuffix(word, suffix, '');
      return condition === null || condition(stem) ? stem + replacement : word;
    }
  }
  return word;
}

function step1a(word: string): string {
  if (word.endsWith('ies') && word.length === 4) return replaceSuffix(word, 'ies', 'ie');
  return applyRuleList(word, [
    ['sses', 'ss', null],
    ['ies', 'i', null],
    ['ss', 'ss', null],
    ['s', '', null],
  ]);
}

function step1b(word: string): string {
  if (word.endsWith('ied')) return replaceSuffix(word, 'ied', word.length === 4 ? 'ie' : 'i');
  if (word.endsWith('eed')) {
    const stem = replaceSuffix(word, 'eed', '');
    return measure(stem) > 0 ? `${stem}ee` : word;
  }
  let intermediate: string | undefined;
  for (const suffix of ['ed', 'ing']) {
    if (word.endsWith(suffix)) {
      const candidate = replaceSuffix(word, suffix, '');
      if (containsVowel(candidate)) {
        intermediate = candidate;
        break;
      }
    }
  }
  if (intermediate === undefined) return word;
  const last = intermediate.at(-1) ?? '';
  return applyRuleList(intermediate, [
    ['at', 'ate', null],
    ['bl', 'ble', null],
    ['iz', 'ize', null],
    ['*d', last, () => !['l', 's', 'z'].includes(last)],
    ['', 'e', (stem) => measure(stem) === 1 && endsCvc(stem)],
  ]);
}

function step1c(word: string): string {
  return applyRuleList(word, [['y', 'i', (stem) => stem.length > 1 && isConsonant(stem, stem.length - 1)]]);
}

function step2(word: string): string {
  if (word.endsWith('alli') && positiveMeasure(replaceSuffix(word, 'alli', ''))) {
    return step2(replaceSuffix(word, 'alli', 'al'));
  }
  return applyRuleList(word, [
    ['ational', 'ate', positiveMeasure],
    ['tional', 'tion', positiveMeasure],
    ['enci', 'ence', positiveMeasure],
    ['anci', 'ance', positiveMeasure],
    ['izer', 'ize', positiveMeasure],
    ['bli', 'ble', positiveMeasure],
    ['alli', 'al', positiveMeasure],
    ['entli', 'ent', positiveMeasure],
    ['eli', 'e', positiveMeasure],
    ['ousli', 'ous', positiveMeasure],
    ['ization', 'ize', positiveMeasure],
    ['ation', 'ate', positiveMeasure],
    ['ator', 'ate', positiveMeasure],
    ['alism', 'al', positiveMeasure],
    ['iveness', 'ive', positiveMeasure],
    ['fulness', 'ful', positiveMeasure],
    ['ousness', 'ous', positiveMeasure],
    ['aliti', 'al', positiveMeasure],
    ['iviti', 'ive', positiveMeasure],
    ['biliti', 'ble', positiveMeasure],
    ['fulli', 'ful', positiveMeasure],
    // NLTK tests the measure of the word minus three letters here, not of the stem.
    ['logi', 'log', () => positiveMeasure(word.slice(0, -3))],
  ]);
}

function step3(word: string): string {
  return applyRuleList(word, [
    ['icate', 'ic', positiveMeasure],
    ['ative', '', positiveMeasure],
    ['alize', 'al', positiveMeasure],
    ['iciti', 'ic', positiveMeasure],
    ['ical', 'ic', positiveMeasure],
    ['ful', '', positiveMeasure],
    ['ness', '', positiveMeasure],
  ]);
}

function step4(word: string): string {
  const gt1 = (stem: string) => measure(stem) > 1;
  return applyRuleList(word, [
    ['al', '', gt1],
    ['ance', '', gt1],
    ['ence', '', gt1],
    ['er', '', gt1],
    ['ic', '', gt1],
    ['able', '', gt1],
    ['ible', '', gt1],
    ['ant', '', gt1],
    ['ement', '', gt1],
    ['ment', '', gt1],
    ['ent', '', gt1],
    ['ion', '', (stem) => measure(stem) > 1 && (stem.endsWith('s') || stem.endsWith('t'))],
    ['ou', '', gt1],
    ['ism', '', gt1],
    ['ate', '', gt1],
    ['iti', '', gt1],
    ['ous', '', gt1],
    ['ive', '', gt1],
    ['ize', '', gt1],
  ]);
}

function step5a(word: string): string {
  if (word.endsWith('e')) {
    const stem = replaceSuffix(word, 'e', '');
    const m = measure(stem);
    if (m > 1) return stem;
    if (m === 1 && !endsCvc(stem)) return stem;
  }
  return word;
}

function step5b(word: string): string {
  return applyRuleList(word, [['ll', 'l', () => measure(word.slice(0, -1)) > 1]]);
}

/** `PorterStemmer().stem(word)` (lower-cases first, as NLTK does by default). */
export function porterStem(word: string): string {
  let stem = word.toLowerCase();
  // NLTK looks the irregular forms up with the word as given, but returns the entry of the lowered word.
  if (POOL.has(word)) return POOL.get(stem) ?? stem;
  if (word.length <= 2) return stem;
  stem = step1a(stem);
  stem = step1b(stem);
  stem = step1c(stem);
  stem = step2(stem);
  stem = step3(stem);
  stem = step4(stem);
  stem = step5a(stem);
  stem = step5b(stem);
  return stem;
}
