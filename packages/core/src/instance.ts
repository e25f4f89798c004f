import type { PerturbationDescription } from './perturbation-description.js';

export const TRAIN_SPLIT = 'train';
export const VALID_SPLIT = 'valid';
export const TEST_SPLIT = 'test';
export const EVAL_SPLITS = [VALID_SPLIT, TEST_SPLIT] as const;
export const ALL_SPLITS = [TRAIN_SPLIT, VALID_SPLIT, TEST_SPLIT] as const;
export const CORRECT_TAG = 'correct';
export const DEFAULT_TEST_SIZE = 1000;

/** `Input{text}`. HELM's PassageQuestionInput serialises the same way; `kind` keeps its class for equality checks. */
export interface Input {
  text: string;
}

/** HELM's `PassageQuestionInput(passage, question, passage_prefix="", question_prefix="Question: ", separator="\n")`. */
export function passageQuestionInput(
  passage: string,
  question: string,
  { passagePrefix = '', questionPrefix = 'Question: ', separator = '\n' } = {},
): Input {
  return { text: passagePrefix + passage + separator + questionPrefix + question };
}

export interface Output {
  text: string;
}

export interface Reference {
  output: Output;
  tags: string[];
}

export function reference(text: string, tags: string[] = []): Reference {
  return { output: { text }, tags };
}

export function isCorrect(ref: Reference): boolean {
  return ref.tags.includes(CORRECT_TAG);
}

/** HELM 0.2.1 `Instance` (field order = JSON order; `undefined` = None, dropped when written). */
export interface Instance {
  input: Input;
  references: Reference[];
  split?: string;
  sub_split?: string;
  id?: string;
  perturbation?: PerturbationDescription;
  contrast_inputs?: Input[];
  contrast_references?: Reference[][];
}

export function instance(fields: Instance): Instance {
  const { input, references, split, sub_split, id, perturbation, contrast_inputs, contrast_references } = fields;
  return { input, references, split, sub_split, id, perturbation, contrast_inputs, contrast_references };
}

export function firstCorrectReference(inst: Instance): Reference | undefined {
  return inst.references.find(isCorrect);
}

export function allCorrectReferences(inst: Instance): Reference[] {
  return inst.references.filter(isCorrect);
}

/** `with_instance_ids`: ids `id0 … idN-1` in scenario order. */
export function withInstanceIds(instances: Instance[]): Instance[] {
  return instances.map((inst, i) => instance({ ...inst, id: `id${i}` }));
}
