import { pyFloat, pyJsonParse } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { type HelmError, objectSpec, type ObjectSpec } from '@flexhelm/core';
import { createPerturbation, PERTURBATION_CLASS_NAMES } from './create-perturbation.js';

const cls = (name: string) => `helm.benchmark.augmentations.${name}`;

async function error(spec: ObjectSpec): Promise<HelmError> {
  try {
    await createPerturbation(spec, { offline: true, helmSourceDir: '/nonexistent-helm' });
  } catch (err) {
    return err as HelmError;
  }
  throw new Error('expected an error');
}

describe('createPerturbation', () => {
  it('builds perturbations from HELM class names and args (plain or parsed)', async () => {
    const space = await createPerturbation(objectSpec(cls('space_perturbation.SpacePerturbation'), { max_spaces: 3 }));
    expect(space.description).toMatchObject({ name: 'space', max_spaces: 3 });
    const parsed = pyJsonParse('{"class_name": "helm.benchmark.augmentations.extra_space_perturbation.ExtraSpacePerturbation", "args": {"num_spaces": 2}}') as Map<string, unknown>;
    const extra = await createPerturbation({ class_name: parsed.get('class_name') as string, args: parsed.get('args') as never });
    expect(extra.description).toMatchObject({ name: 'extra_space', num_spaces: 2 });
    expect(PERTURBATION_CLASS_NAMES).toHaveLength(14);
  });

  it('rejects bad args the way Python calls would, saying what the class takes', async () => {
    const missing = await error(objectSpec(cls('space_perturbation.SpacePerturbation'), {}));
    expect(missing.pythonClass).toBe('TypeError');
    expect(missing.message).toMatch(/max_spaces.*SpacePerturbation\(max_spaces: int\)/);
    const extra = await error(objectSpec(cls('lowercase_perturbation.LowerCasePerturbation'), { prob: 0.5 }));
    expect(extra.message).toMatch(/prob/);
    const type = await error(objectSpec(cls('typos_perturbation.TyposPerturbation'), { prob: '0.1' }));
    expect(type.pythonClass).toBe('TypeError');
  });

  it('names unknown classes, unavailable synonyms and failed asserts', async () => {
    expect((await error(objectSpec('helm.benchmark.augmentations.foo.Foo'))).message).toMatch(/Unknown perturbation class.*MildMixPerturbation/);
    const synonym = await error(objectSpec(cls('synonym_perturbation.SynonymPerturbation'), { prob: 0.5 }));
    expect(synonym.pythonClass).toBe('NotImplementedError');
    expect(synonym.message).toMatch(/spaCy/);
    const gender = await error(objectSpec(cls('gender_perturbation.GenderPerturbation'), { mode: 'nouns', prob: pyFloat(1), source_class: 'male', target_class: 'female' }));
    expect(gender.message).toMatch(/HELM's gender_perturbation.py is not in \/nonexistent-helm/);
    const dialect = await error(objectSpec(cls('dialect_perturbation.DialectPerturbation'), { prob: 0.5, source_class: 'SAE', target_class: 'BrE', mapping_file_path: null }));
    expect(dialect.message).toMatch(/No dialect mapping from SAE to BRE/);
  });

  it('explains how to get HELM word lists when offline', async () => {
    const err = await error(objectSpec(cls('mild_mix_perturbation.MildMixPerturbation')));
    expect(err.pythonClass).toBe('FileNotFoundError');
    expect(err.message).toMatch(/HELM v0.2.1 checkout/);
  });
});
