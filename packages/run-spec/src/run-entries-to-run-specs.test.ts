import { describe, expect, it } from 'vitest';
import { HelmError } from '@flexhelm/core';
import { constructRunSpecs } from './construct-run-specs.js';
import { runEntriesToRunSpecs } from './run-entries-to-run-specs.js';

describe('runEntriesToRunSpecs', () => {
  const opt = 'boolq:model=together/opt-175b';

  it('overrides max_eval_instances and num_train_trials', () => {
    const [rs] = runEntriesToRunSpecs([{ description: opt, priority: 1 }], { maxEvalInstances: 1000, numTrainTrials: 3 });
    expect([rs!.adapter_spec.max_eval_instances, rs!.adapter_spec.num_train_trials]).toEqual([1000, 3]);
  });

  it('without overrides keeps the adapter spec (None max_eval_instances is dropped from JSON)', () => {
    const [rs] = runEntriesToRunSpecs([{ description: opt, priority: 1 }]);
    expect([rs!.adapter_spec.max_eval_instances, rs!.adapter_spec.num_train_trials]).toEqual([undefined, 1]);
  });

  it('zero-shot run specs always get one train trial', () => {
    const [rs] = runEntriesToRunSpecs([{ description: 'wikitext_103:model=together/opt-175b', priority: 1 }], { numTrainTrials: 3 });
    expect(rs!.adapter_spec.num_train_trials).toBe(1);
    const specs = runEntriesToRunSpecs([{ description: 'quac:model=together/opt-175b,max_train_instances=all', priority: 1 }], { numTrainTrials: 3 });
    expect(specs.map((r) => r.adapter_spec.num_train_trials)).toEqual([1, 3, 3, 3, 3, 3]);
  });

  it('filters by priority, model and group', () => {
    const entries = [
      { description: opt, priority: 3 },
      { description: 'imdb:model=opt_tokenizer', priority: 1 },
    ];
    expect(runEntriesToRunSpecs(entries, { priority: 2 }).map((r) => r.name)).toEqual(['imdb:model=together_opt-175b', 'imdb:model=together_opt-66b']);
    expect(runEntriesToRunSpecs(entries, { modelsToRun: ['together/opt-66b'] }).map((r) => r.name)).toEqual(['imdb:model=together_opt-66b']);
    expect(runEntriesToRunSpecs(entries, { groupsToRun: ['boolq'] }).map((r) => r.name)).toEqual(['boolq:model=together_opt-175b']);
    expect(runEntriesToRunSpecs(entries, { groupsToRun: [] })).toHaveLength(3);
  });

  it('appends entry groups, sorted and joined with - in the name', () => {
    const [rs] = runEntriesToRunSpecs([{ description: opt, priority: 1, groups: ['zeta', 'alpha/x'] }]);
    expect(rs!.name).toBe('boolq:model=together_opt-175b,groups=alpha_x-zeta');
    expect(rs!.groups).toEqual(['boolq', 'zeta', 'alpha/x']);
    const [empty] = runEntriesToRunSpecs([{ description: opt, priority: 1, groups: [] }]);
    expect([empty!.name, empty!.groups]).toEqual(['boolq:model=together_opt-175b', ['boolq']]);
  });
});

describe('a 1,000,000-character description', () => {
  const huge = 'm'.repeat(1_000_000);
  const failure = (description: string): HelmError => {
    try {
      runEntriesToRunSpecs([{ description, priority: 1 }]);
    } catch (err) {
      if (err instanceof HelmError) return err;
      throw err;
    }
    throw new Error('accepted');
  };

  it('is refused by the description grammar with its length and the limit, quoted short', () => {
    const error = failure(huge);
    expect(error.pythonClass).toBe('ValueError');
    expect(error.message).toBe(
      `run entry "${'m'.repeat(80)}"… (1000000 characters): the description is 1000000 characters long; at most 10000 are accepted ` +
        '(a description is a run-spec name and a few key=value arguments, e.g. mmlu:subject=anatomy,model=text)',
    );
  });

  it('as a run-spec name that bypasses the grammar is an unknown name without suggestions, quoted short', () => {
    const error = failure(`${huge.slice(0, 9000)}:model=text`);
    expect(error.message).toMatch(/^run entry "m{80}"… \(9011 characters\): Unknown run spec name: 'm{80}'… \(9000 characters\); known names: simple1, boolq, /);
    expect(() => constructRunSpecs({ class_name: huge, args: {} })).toThrow(/^Unknown run spec name: 'm{80}'… \(1000000 characters\); known names: simple1, /);
  });

  it('as a model name is an unknown model, quoted short', () => {
    expect(() => constructRunSpecs({ class_name: 'boolq', args: { model: huge } })).toThrow(/^No model with name: 'm{80}'… \(1000000 characters\); /);
  });
});
