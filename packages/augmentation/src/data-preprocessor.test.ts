import { describe, expect, it } from 'vitest';
import { dataAugmenterSpec, helmJson, instance, objectSpec, reference, withInstanceIds, type Input, type Instance } from '@flexhelm/core';
import { DataAugmenter } from './data-augmenter.js';
import { DataPreprocessor } from './data-preprocessor.js';
import { ExtraSpacePerturbation } from './extra-space-perturbation.js';
import { inputsEqual } from './input-equality.js';
import { LowerCasePerturbation } from './lower-case-perturbation.js';
import { SpacePerturbation } from './space-perturbation.js';

const EXTRA_SPACE_5 = objectSpec('helm.benchmark.augmentations.extra_space_perturbation.ExtraSpacePerturbation', { num_spaces: 5 });

function scenario(): Instance[] {
  const make = (split: string, i: number) => instance({ input: { text: `${split} input ${i}` }, references: [reference(`out ${i}`, ['correct'])], split });
  return withInstanceIds([
    ...Array.from({ length: 10 }, (_, i) => make('train', i)),
    ...Array.from({ length: 5 }, (_, i) => make('valid', i)),
    ...Array.from({ length: 5 }, (_, i) => make('test', i)),
  ]);
}

describe('DataPreprocessor (HELM test_data_preprocessor)', () => {
  it('keeps ids and order without augmentation', async () => {
    const out = await new DataPreprocessor(dataAugmenterSpec()).preprocess(scenario());
    expect(out.map((inst) => inst.id)).toEqual(Array.from({ length: 20 }, (_, i) => `id${i}`));
  });

  it('augments eval instances only: 10 train + 10 eval + 10 perturbed', async () => {
    const spec = dataAugmenterSpec({ perturbation_specs: [EXTRA_SPACE_5], should_augment_eval_instances: true, should_include_original_eval: true });
    const out = await new DataPreprocessor(spec).preprocess(scenario());
    expect(out).toHaveLength(30);
    for (const inst of out) expect(inst.input.text.includes(' '.repeat(5))).toBe(inst.perturbation?.name === 'extra_space');
    expect(out.slice(10, 12).map((inst) => [inst.id, inst.perturbation?.name])).toEqual([['id10', undefined], ['id10', 'extra_space']]);
  });

  it('augments train instances when asked, and drops instances of other splits like HELM', async () => {
    const spec = dataAugmenterSpec({ perturbation_specs: [EXTRA_SPACE_5], should_augment_train_instances: true });
    const instances = [...scenario(), instance({ input: { text: 'no split' }, references: [], id: 'idX' })];
    const out = await new DataPreprocessor(spec).preprocess(instances);
    expect(out).toHaveLength(20);
    expect(out.slice(0, 10).every((inst) => inst.perturbation?.name === 'extra_space')).toBe(true);
  });
});

describe('DataAugmenter', () => {
  const inst = instance({ input: { text: 'already lower' }, references: [], split: 'test', id: 'id0' });

  it('skips unchanged copies and runs seeds None, 1, 2…', () => {
    const augmenter = new DataAugmenter([new LowerCasePerturbation(), new SpacePerturbation(3)]);
    const out = augmenter.generate([inst], { skipUnchanged: true, seedsPerInstance: 3 });
    expect(out[0]).toBe(inst);
    expect(out.slice(1).map((i) => [i.perturbation?.name, i.perturbation?.seed, i.input.text])).toEqual(
      new DataAugmenter([new SpacePerturbation(3)])
        .generate([inst], { includeOriginal: false, seedsPerInstance: 3 })
        .filter((i) => i.input.text !== inst.input.text)
        .map((i) => [i.perturbation?.name, i.perturbation?.seed, i.input.text]),
    );
    expect(augmenter.generate([inst], { includeOriginal: false })).toHaveLength(2);
  });

  it('keeps "unchanged" copies of a PassageQuestionInput (class mismatch in Python ==)', () => {
    const passage: Input = { text: 'already lower' };
    Object.defineProperty(passage, 'kind', { value: 'PassageQuestionInput', enumerable: false });
    const pqi = instance({ ...inst, input: passage });
    expect(inputsEqual(passage, { text: 'already lower' })).toBe(false);
    const out = new DataAugmenter([new LowerCasePerturbation()]).generate([pqi], { skipUnchanged: true });
    expect(out).toHaveLength(2);
    expect(helmJson(out[0]!.input)).toBe('{\n  "text": "already lower"\n}');
  });

  it('writes perturbed instances in HELM field order', () => {
    const [, out] = new DataAugmenter([new ExtraSpacePerturbation(2)]).generate([instance({ ...inst, input: { text: 'a b' } })], {});
    expect(helmJson(out)).toBe(
      '{\n  "input": {\n    "text": "a  b"\n  },\n  "references": [],\n  "split": "test",\n  "id": "id0",\n  "perturbation": {\n    "name": "extra_space",\n    "robustness": true,\n    "fairness": false,\n    "computed_on": "perturbed",\n    "num_spaces": 2\n  }\n}',
    );
  });

  it('needs instance ids', () => {
    expect(() => new SpacePerturbation(2).apply(instance({ input: { text: 'a b' }, references: [] }))).toThrow(/instance ids/);
  });
});
