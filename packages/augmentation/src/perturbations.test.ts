import { pyFloat } from '@flexhelm/python-compat';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helmJson, instance, reference, type Instance } from '@flexhelm/core';
import { ContractionPerturbation } from './contraction-perturbation.js';
import { ContrastSetsPerturbation } from './contrast-sets-perturbation.js';
import { DataAugmenter } from './data-augmenter.js';
import { DialectPerturbation } from './dialect-perturbation.js';
import { ExpansionPerturbation } from './expansion-perturbation.js';
import { ExtraSpacePerturbation } from './extra-space-perturbation.js';
import { FillerWordsPerturbation } from './filler-words-perturbation.js';
import { GenderPerturbation } from './gender-perturbation.js';
import { LowerCasePerturbation } from './lower-case-perturbation.js';
import { MildMixPerturbation } from './mild-mix-perturbation.js';
import { MisspellingPerturbation } from './misspelling-perturbation.js';
import { PersonNamePerturbation } from './person-name-perturbation.js';
import { SpacePerturbation } from './space-perturbation.js';
import { TyposPerturbation } from './typos-perturbation.js';

// Small word lists of our own. Every expected string below was produced by HELM 0.2.1's own perturbation classes
// with these same lists patched in, so the tests pin the algorithms (draw order, regexes, case handling).
const CONTRACTIONS = new Map([
  ["it's", 'it is'], ["It's", 'It is'], ["can't", 'cannot'], ["I'm", 'I am'], ["i'm", 'i am'], ["isn't", 'is not'], ["ain't", 'is not'], ["we'll", 'we will'],
]);
const MISSPELLINGS = new Map([
  ['the', ['teh', 'hte']], ['The', ['Teh']], ['about', ['abuot']], ['about the', ['abotu the']], ['receive', ['recieve', 'receeve', 'recive']], ['naïve', ['naive']],
]);
const FILLERS = { speaker: ['I reckon'], uncertain: ['maybe', 'kind of'], fill: ['um', 'well'] };

function inst(text: string, refs: string[] = ['Is the answer yes?'], id = 'id0'): Instance {
  return instance({ input: { text }, references: refs.map((r) => reference(r)), id });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'augmentation-test-'));
  await writeFile(join(dir, 'gmap.json'), JSON.stringify([['he', 'she', 'they'], ['his', 'her', 'their'], ['Boy', 'girl', 'kid']]));
  await writeFile(join(dir, 'dmap.json'), JSON.stringify({ the: ['da'], with: ['wit', 'wid'], 'going to': ['gon'], 'a.m.': ['mornin'] }));
  await writeFile(
    join(dir, 'names.txt'),
    'Adam,first_name,race,white_american,gender,male\nEmily,first_name,race,white_american,gender,female\nJamal,first_name,race,black_american,gender,male\nLakisha,first_name,race,black_american,gender,female\nEbony,first_name,race,black_american,gender,female\n',
  );
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('perturbations without word lists (HELM unit tests)', () => {
  it('extra_space', () => {
    const [, out] = new DataAugmenter([new ExtraSpacePerturbation(2)]).generate([inst('Hello my name is', ['some name'])]);
    expect(out!.input.text).toBe('Hello  my  name  is');
    expect(out!.id).toBe('id0');
    expect(out!.perturbation).toMatchObject({ name: 'extra_space', num_spaces: 2 });
    expect(out!.references[0]!.output.text).toBe('some name');
  });
  it('space', () => {
    const [, out] = new DataAugmenter([new SpacePerturbation(3)]).generate([inst('Hello World!\nQuite a day, huh?', [])]);
    expect(out!.input.text).toBe('Hello   World!\nQuite a  day,   huh?');
  });
  it('lowercase leaves references alone', () => {
    const [, out] = new DataAugmenter([new LowerCasePerturbation()]).generate([inst('Hello World!\nQuite a day, huh?', ['Yes!'])]);
    expect(out!.input.text).toBe('hello world!\nquite a day, huh?');
    expect(out!.references[0]!.output.text).toBe('Yes!');
  });
});

describe('perturbations with our own lists, against HELM outputs', () => {
  it('contraction: only expansions followed by a space, case kept', () => {
    const p = new ContractionPerturbation(CONTRACTIONS);
    expect(p.apply(inst('It is the naïve café; about the RECEIVE, I AM sure it is fine. She is happy and it is late')).input.text).toBe(
      "It's the naïve café; about the RECEIVE, I'm sure it's fine. She is happy and it's late",
    );
  });
  it('expansion', () => {
    const p = new ExpansionPerturbation(CONTRACTIONS);
    expect(p.apply(inst("It's sure I'm IT'S can't-stop isn't ain't we'll")).input.text).toBe('It is sure I am It is cannot-stop is not is not we will');
  });
  it('misspelling: ordered alternatives, one draw pair per match', () => {
    const p = new MisspellingPerturbation(0.6, MISSPELLINGS);
    const text = 'The theory: about the receive, the naïve receive of the THE';
    expect([undefined, 1, 2, 3].map((seed) => p.apply(inst(text), seed).input.text)).toEqual([
      'Teh theory: about teh receeve, hte naive recive of teh THE',
      'The theory: abuot teh receeve, teh naïve recieve of the THE',
      'Teh theory: abuot the recive, teh naïve receive of hte THE',
      'Teh theory: about teh receive, hte naive recieve of hte THE',
    ]);
  });
  it('filler words', () => {
    const p = new FillerWordsPerturbation(FILLERS, { insertProb: 0.4 });
    expect([undefined, 1].map((seed) => p.apply(inst('one two  three four five six'), seed).input.text)).toEqual([
      'one two well  um three kind of four maybe five um six',
      'one I reckon two  three kind of four five six',
    ]);
    const capped = new FillerWordsPerturbation(FILLERS, { insertProb: pyFloat(1), maxNumInsert: 2, speakerPh: false });
    expect(capped.apply(inst('one two three')).input.text).toBe('well one um two three');
  });
  it('mild_mix: lowercase, contraction, misspelling 0.1, space 3 with one generator', () => {
    const p = new MildMixPerturbation(CONTRACTIONS, MISSPELLINGS);
    const texts = [0, 1, 2, 3].map((k) => p.apply(inst('It Is The best; I am SURE about the receive.  The end', [], `id${k}`)).input.text);
    expect(texts).toEqual([
      "it's  the best; i'm  sure about the receive. the   end",
      "it's the  best;  i'm sure  about   the  receive.   the  end",
      "it's the   best; i'm  sure  about the recive.  the   end",
      "it's   the best;   i'm sure   about  the  receive.   the  end",
    ]);
    expect(helmJson(p.apply(inst('x'), 3).perturbation)).toBe('{\n  "name": "mild_mix",\n  "robustness": true,\n  "fairness": false,\n  "computed_on": "perturbed",\n  "seed": 3\n}');
  });
  it('gender from a mapping file, bidirectional, references first', async () => {
    const p = await GenderPerturbation.create({
      mode: 'terms', prob: 0.7, sourceClass: 'he', targetClass: 'SHE',
      mappingFilePath: 'gmap.json', mappingFileGenders: ['He', 'she', 'they'], bidirectional: true,
    }, { baseDir: dir });
    const out = p.apply(inst('He said: his boy, her girl (he) she. BOY-he', ['his? he!']), 4);
    expect(out.input.text).toBe('He said: his girl, his boy (he) he. BOY-he');
    expect(out.references[0]!.output.text).toBe('his? she!');
    expect(helmJson(out.perturbation)).toBe(
      '{\n  "name": "gender",\n  "robustness": false,\n  "fairness": true,\n  "computed_on": "perturbed",\n  "seed": 4,\n  "mode": "terms",\n  "prob": 0.7,\n  "source_class": "he",\n  "target_class": "she",\n  "bidirectional": true\n}',
    );
  });
  it('dialect from a mapping file: delimiters consumed, regex characters literal', async () => {
    const p = await DialectPerturbation.create({ prob: 0.9, sourceClass: 'SAE', targetClass: 'aave', mappingFilePath: join(dir, 'dmap.json') });
    const out = p.apply(inst('With the dog, going to THE park with the cat at 9 a.m. today-the end the', ['And the answer?']), 7);
    expect(out.input.text).toBe('With da dog, gon THE park wit the cat at 9 mornin today-the end the');
    expect(out.references[0]!.output.text).toBe('And da answer?');
    expect(out.perturbation).toMatchObject({ source_class: 'SAE', target_class: 'AAVE', mapping_file_path: join(dir, 'dmap.json') });
  });
  it('person_name: consistent across references and input, seed ignored', async () => {
    const p = await PersonNamePerturbation.create(
      { prob: pyFloat(1), sourceClass: { race: 'white_american' }, targetClass: new Map([['race', 'black_american']]), nameFilePath: 'names.txt' },
      { baseDir: dir },
    );
    const out = p.apply(inst("Adam met EMILY and adam's friend emily-Adam.", ['Emily and Adam.'], 'id3'));
    expect(out.input.text).toBe("Jamal met EBONY and jamal's friend ebony-Jamal.");
    expect(out.references[0]!.output.text).toBe('Ebony and Jamal.');
    expect(out.perturbation?.seed).toBeUndefined();
    expect(out.perturbation).toMatchObject({ source_class: 'race=white_american', name_file_path: 'names.txt', preserve_gender: true });
  });
});

describe('typos (invariants with our own keyboard)', () => {
  const keyboard = new Map([['a', 'qs'], ['s', 'ad'], ['e', 'wr']]);
  it('prob 0 changes nothing and prob 1 moves every mapped letter to a neighbour, keeping case', () => {
    const text = 'Sea salt, ÉAS and 42 eggs.';
    expect(new TyposPerturbation(0, keyboard).apply(inst(text)).input.text).toBe(text);
    const out = Array.from(new TyposPerturbation(1, keyboard).apply(inst(text), 5).input.text);
    Array.from(text).forEach((c, i) => {
      const options = keyboard.get(c.toLowerCase());
      if (!options) expect(out[i]).toBe(c);
      else {
        expect(options.includes(out[i]!.toLowerCase())).toBe(true);
        expect(out[i] === out[i]!.toUpperCase()).toBe(c === c.toUpperCase());
      }
    });
  });
});

describe('contrast sets', () => {
  it('swaps in a contrast input and its references, or returns the instance unchanged', () => {
    const base = instance({
      input: { text: 'original' },
      references: [reference('no', ['correct'])],
      id: 'id0',
      contrast_inputs: [{ text: 'c0' }, { text: 'c1' }, { text: 'c2' }],
      contrast_references: [[reference('a')], [reference('b')], [reference('c')]],
    });
    const p = new ContrastSetsPerturbation();
    const out = p.apply(base, 1);
    // Python: Random("1id0").choice(range(3)) == 0 and Random("id0").choice(range(3)) == 2.
    expect(out.input.text).toBe('c0');
    expect(out.references[0]!.output.text).toBe('a');
    expect(p.apply(base).input.text).toBe('c2');
    expect(out.perturbation).toMatchObject({ name: 'contrast_sets', robustness: true, seed: 1 });
    const plain = instance({ input: { text: 'x' }, references: [], id: 'id1' });
    expect(p.apply(plain).input).toBe(plain.input);
    expect(new DataAugmenter([p]).generate([plain], { skipUnchanged: true })).toEqual([plain]);
  });

  it('names the instance whose contrast references are fewer than its contrast inputs', () => {
    const lopsided = instance({ input: { text: 'x' }, references: [], id: 'id7', contrast_inputs: [{ text: 'c0' }, { text: 'c1' }, { text: 'c2' }], contrast_references: [[reference('a')]] });
    // Random("id7").choice(range(3)) picks a contrast input that has no references.
    expect(() => new ContrastSetsPerturbation().apply(lopsided)).toThrow('list index out of range: instance id7 has 3 contrast inputs but 1 contrast reference lists');
  });
});

describe('bad mapping and name files fail clearly', () => {
  it('rejects malformed JSON and wrong shapes', async () => {
    await writeFile(join(dir, 'broken.json'), '{"the": ["da"');
    await expect(DialectPerturbation.create({ prob: 1, sourceClass: 'SAE', targetClass: 'AAVE', mappingFilePath: 'broken.json' }, { baseDir: dir })).rejects.toThrow(/Cannot read the dialect mapping .*broken.json/);
    await writeFile(join(dir, 'list.json'), '["the"]');
    await expect(DialectPerturbation.create({ prob: 1, sourceClass: 'SAE', targetClass: 'AAVE', mappingFilePath: 'list.json' }, { baseDir: dir })).rejects.toThrow(/must be a JSON object/);
    await expect(
      GenderPerturbation.create({ mode: 'terms', prob: 1, sourceClass: 'a', targetClass: 'b', mappingFilePath: 'list.json', mappingFileGenders: ['a', 'b'] }, { baseDir: dir }),
    ).rejects.toThrow(/list of lists/);
    await expect(
      GenderPerturbation.create({ mode: 'terms', prob: 1, sourceClass: 'x', targetClass: 'she', mappingFilePath: 'gmap.json', mappingFileGenders: ['he', 'she', 'they'] }, { baseDir: dir }),
    ).rejects.toThrow(/"x" is not one of the mapping's genders/);
  });

  it('raises KeyError like HELM when a mapping key is not lower case', async () => {
    await writeFile(join(dir, 'upper.json'), '{"The": ["da"]}');
    const p = await DialectPerturbation.create({ prob: 1, sourceClass: 'SAE', targetClass: 'AAVE', mappingFilePath: 'upper.json' }, { baseDir: dir });
    expect(() => p.apply(inst('see the dog', []))).toThrow(/KeyError|no lower-case key/);
  });

  it('reads name files like Python text mode and rejects lines without a name type', async () => {
    await writeFile(join(dir, 'crlf.txt'), 'Adam,first_name,race,white_american,gender,male\r\nJamal,first_name,race,black_american,gender,male\r\n');
    const p = await PersonNamePerturbation.create({ prob: 1, sourceClass: { race: 'white_american' }, targetClass: { race: 'black_american' }, nameFilePath: 'crlf.txt' }, { baseDir: dir });
    expect(p.apply(inst('Hi Adam!', [])).input.text).toBe('Hi Jamal!');
    await writeFile(join(dir, 'blank.txt'), 'Adam,first_name,race,white_american\n\nJamal,first_name,race,black_american\n');
    await expect(PersonNamePerturbation.create({ prob: 1, sourceClass: { race: 'white_american' }, targetClass: { race: 'black_american' }, nameFilePath: 'blank.txt' }, { baseDir: dir })).rejects.toThrow(/line 2/);
    await expect(
      PersonNamePerturbation.create({ prob: 1, sourceClass: { race: 'White_American' }, targetClass: { race: 'black_american' }, nameFilePath: 'crlf.txt' }, { baseDir: dir }),
    ).rejects.toThrow(/race=White_American/);
    await writeFile(join(dir, 'nogender.txt'), 'Adam,first_name,race,white_american\nJamal,first_name,race,black_american\n');
    await expect(PersonNamePerturbation.create({ prob: 1, sourceClass: { race: 'white_american' }, targetClass: { race: 'black_american' }, nameFilePath: 'nogender.txt' }, { baseDir: dir })).rejects.toThrow(/preserve_gender needs "gender"/);
    await expect(PersonNamePerturbation.create({ prob: 2, sourceClass: { race: 'white_american' }, targetClass: { race: 'black_american' }, nameFilePath: 'crlf.txt' }, { baseDir: dir })).rejects.toThrow(/between 0 and 1/);
  });
});
