import { describe, expect, it } from 'vitest';
import { HelmError, helmJson } from '@flexhelm/core';
import { constructRunSpecs } from './construct-run-specs.js';
import { parseObjectSpec } from './parse-object-spec.js';
import { MMLU_SUBJECTS } from './scenario-argument-checks.js';

const resources = { raftInstructions: () => 'Classify.', bigBenchTask: () => ({ metrics: ['bleu'] }) };
const build = (description: string, checkScenarioArguments?: boolean) =>
  constructRunSpecs(parseObjectSpec(description), { resources, ...(checkScenarioArguments === undefined ? {} : { checkScenarioArguments }) });

function refusal(description: string): HelmError {
  try {
    build(description);
  } catch (err) {
    if (err instanceof HelmError) return err;
    throw err;
  }
  throw new Error(`${description} was accepted`);
}

// Every way a value could leave the scenario's folder once joined into a path.
const HOSTILE = ['../../../../../secret/leak', '/etc/passwd', '..', '..%2f..%2fsecret', '%2e%2e/secret', 'a/../../b', 'a\\..\\..\\b', 'leak\0', 'C:\\secret', '.hidden', 'x'.repeat(101)];

// One template per run-spec function whose scenario turns an argument into a file name; `{}` is the hostile value.
const FAMILIES: readonly (readonly [string, string])[] = [
  ['mmlu:subject={},model=text', 'subject'],
  ['interactive_qa_mmlu:subject={},model=text', 'subject'],
  ['bbq:subject={},model=text', 'subject'],
  ['bold:subject={},model=text', 'subject'],
  ['civil_comments:demographic={},model=text', 'demographic'],
  ['wikifact:k=5,subject={},model=text', 'subject'],
  ['commonsense:dataset={},method=multiple_choice_joint,model=text', 'dataset'],
  ['truthful_qa:task={},model=text', 'task'],
  ['twitter_aae:demographic={},model=text', 'demographic'],
  ['raft:subset={},model=text', 'subset'],
  ['math:subject={},level=1,model=text', 'subject'],
  ['lsat_qa:task={},model=text', 'task'],
  ['babi_qa:task={},model=text', 'task'],
  ['copyright:datatag={},model=text', 'datatag'],
  ['disinformation:capability=reiteration,topic={},model=text', 'topic'],
  ['the_pile:subset={},model=text', 'subset'],
  ['ice:subset={},model=text', 'subset'],
  ['synthetic_efficiency:tokenizer={},model=text', 'tokenizer'],
  ['blimp:phenomenon={},model=text', 'phenomenon'],
  ['entity_matching:dataset={},model=text', 'dataset'],
  ['entity_data_imputation:dataset={},model=text', 'dataset'],
  ['big_bench:task={},subtask=s,model=text', 'task'],
  ['big_bench:task=t,subtask={},model=text', 'subtask'],
  ['med_dialog:subset={},model=text', 'subset'],
];

describe('scenario arguments that name files are checked when run specs are built', () => {
  it.each(FAMILIES)('%s refuses every traversal form with a ValueError naming %s', (template, argument) => {
    for (const hostile of HOSTILE) {
      const error = refusal(template.replace('{}', hostile));
      expect(error.pythonClass).toBe('ValueError');
      expect(error.message).toContain(`${argument}=`);
      expect(error.message).toMatch(/is not allowed: \w+ names the scenario's data files, so it must be (one of|a plain name|an organization\/name|all or a task number)/);
    }
  });

  it('says what is allowed, with HELM list where HELM has one', () => {
    expect(refusal('mmlu:subject=../../../../../secret/leak,model=text').message).toBe(
      `MMLUScenario: subject='../../../../../secret/leak' is not allowed: subject names the scenario's data files, so it must be one of ${MMLU_SUBJECTS.join(', ')}`,
    );
    expect(refusal('babi_qa:task=21,model=text').message).toMatch(/task=21 is not allowed: .* all or a task number from 1 to 20$/);
    expect(refusal('big_bench:task=../t,subtask=,model=text').message).toMatch(/task='\.\.\/t' is not allowed: .*a plain name \(letters, digits, _ and -, with dots only between them, at most 100 characters\)$/);
    expect(refusal(`mmlu:subject=${'a'.repeat(5000)},model=text`).message).toContain(`subject='${'a'.repeat(80)}'… (5000 characters) is not allowed`);
  });

  it('accepts every value HELM accepts, with the same run_spec.json as without the check', () => {
    for (const description of [
      ...MMLU_SUBJECTS.map((subject) => `mmlu:subject=${subject},model=text`),
      'the_pile:subset=Gutenberg (PG-19),model=text',
      'babi_qa:task=all,model=text',
      'babi_qa:task=20,model=text',
      'babi_qa:task=1.5,model=text',
      'copyright:datatag=prompt_num_line_1-min_lines_20.json,model=text',
      'disinformation:capability=wedging,model=text',
      'ice:gender=female,model=text',
      'big_bench:task=t,subtask=,model=text',
      'big_bench:task=t,subtask=0,model=text',
      'synthetic_efficiency:random=None,num_prompt_tokens=default_sweep,num_output_tokens=default_sweep,tokenizer=default,model=text',
      'wikifact:k=5,subject=original_language_of_film_or_TV_show,model=text',
    ]) {
      expect(build(description).map(helmJson), description).toEqual(build(description, false).map(helmJson));
    }
  });

  it('can be switched off to reproduce HELM, which builds the run spec and leaves the check to the scenario', () => {
    expect(build('mmlu:subject=../../x,model=text', false)[0]!.scenario_spec.args).toEqual({ subject: '../../x' });
  });
});
