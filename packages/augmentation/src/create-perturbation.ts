import { PyFloat, type PyNumber } from '@flexhelm/python-compat';
import { z } from 'zod';
import { HelmError, type PerturbationSpec } from '@flexhelm/core';
import { ContractionPerturbation } from './contraction-perturbation.js';
import { ContrastSetsPerturbation } from './contrast-sets-perturbation.js';
import type { DataOptions } from './data-files.js';
import { DialectPerturbation } from './dialect-perturbation.js';
import { ExpansionPerturbation } from './expansion-perturbation.js';
import { ExtraSpacePerturbation } from './extra-space-perturbation.js';
import { FillerWordsPerturbation } from './filler-words-perturbation.js';
import { GenderPerturbation } from './gender-perturbation.js';
import { LowerCasePerturbation } from './lower-case-perturbation.js';
import { MildMixPerturbation } from './mild-mix-perturbation.js';
import { MisspellingPerturbation } from './misspelling-perturbation.js';
import type { Perturbation } from './perturbation.js';
import { PersonNamePerturbation } from './person-name-perturbation.js';
import { SpacePerturbation } from './space-perturbation.js';
import { SynonymPerturbation } from './synonym-perturbation.js';
import { TyposPerturbation } from './typos-perturbation.js';

const PREFIX = 'helm.benchmark.augmentations.';

const number = z.union([z.number(), z.instanceof(PyFloat)]).transform((x): PyNumber => x);
const int = z.number().int();
const optionalString = z.string().nullish().transform((s) => s ?? undefined);
const stringDict = z.union([z.map(z.string(), z.string()), z.record(z.string(), z.string())]);

interface Entry {
  /** The Python signature, quoted in error messages. */
  signature: string;
  schema: z.ZodType;
  create(args: never, data: DataOptions): Perturbation | Promise<Perturbation>;
}

function entry<S extends z.ZodType>(
  signature: string,
  schema: S,
  create: (args: z.output<S>, data: DataOptions) => Perturbation | Promise<Perturbation>,
): Entry {
  return { signature, schema, create: create as Entry['create'] };
}

/** Every HELM 0.2.1 perturbation class, by the `class_name` its PerturbationSpec uses. */
const PERTURBATIONS: Record<string, Entry> = {
  'extra_space_perturbation.ExtraSpacePerturbation': entry('ExtraSpacePerturbation(num_spaces: int)', z.strictObject({ num_spaces: int }), (a) => new ExtraSpacePerturbation(a.num_spaces)),
  'space_perturbation.SpacePerturbation': entry('SpacePerturbation(max_spaces: int)', z.strictObject({ max_spaces: int }), (a) => new SpacePerturbation(a.max_spaces)),
  'lowercase_perturbation.LowerCasePerturbation': entry('LowerCasePerturbation()', z.strictObject({}), () => new LowerCasePerturbation()),
  'contraction_expansion_perturbation.ContractionPerturbation': entry('ContractionPerturbation()', z.strictObject({}), (_a, d) => ContractionPerturbation.create(d)),
  'contraction_expansion_perturbation.ExpansionPerturbation': entry('ExpansionPerturbation()', z.strictObject({}), (_a, d) => ExpansionPerturbation.create(d)),
  'misspelling_perturbation.MisspellingPerturbation': entry('MisspellingPerturbation(prob: float)', z.strictObject({ prob: number }), (a, d) => MisspellingPerturbation.create(a.prob, d)),
  'mild_mix_perturbation.MildMixPerturbation': entry('MildMixPerturbation()', z.strictObject({}), (_a, d) => MildMixPerturbation.create(d)),
  'filler_words_perturbation.FillerWordsPerturbation': entry(
    'FillerWordsPerturbation(insert_prob=0.333, max_num_insert=None, speaker_ph=True, uncertain_ph=True, fill_ph=True)',
    z.strictObject({
      insert_prob: number.optional(),
      max_num_insert: int.nullish(),
      speaker_ph: z.boolean().optional(),
      uncertain_ph: z.boolean().optional(),
      fill_ph: z.boolean().optional(),
    }),
    (a, d) =>
      FillerWordsPerturbation.create(
        { insertProb: a.insert_prob, maxNumInsert: a.max_num_insert ?? undefined, speakerPh: a.speaker_ph, uncertainPh: a.uncertain_ph, fillPh: a.fill_ph },
        d,
      ),
  ),
  'typos_perturbation.TyposPerturbation': entry('TyposPerturbation(prob: float)', z.strictObject({ prob: number }), (a, d) => TyposPerturbation.create(a.prob, d)),
  'dialect_perturbation.DialectPerturbation': entry(
    'DialectPerturbation(prob: float, source_class: str, target_class: str, mapping_file_path: Optional[str] = None)',
    z.strictObject({ prob: number, source_class: z.string(), target_class: z.string(), mapping_file_path: optionalString }),
    (a, d) => DialectPerturbation.create({ prob: a.prob, sourceClass: a.source_class, targetClass: a.target_class, mappingFilePath: a.mapping_file_path }, d),
  ),
  'gender_perturbation.GenderPerturbation': entry(
    'GenderPerturbation(mode: str, prob: float, source_class: str, target_class: str, mapping_file_path: Optional[str] = None, mapping_file_genders: List[str] = None, bidirectional: bool = False)',
    z.strictObject({
      mode: z.string(),
      prob: number,
      source_class: z.string(),
      target_class: z.string(),
      mapping_file_path: optionalString,
      mapping_file_genders: z.array(z.string()).nullish(),
      bidirectional: z.boolean().optional(),
    }),
    (a, d) =>
      GenderPerturbation.create(
        {
          mode: a.mode,
          prob: a.prob,
          sourceClass: a.source_class,
          targetClass: a.target_class,
          mappingFilePath: a.mapping_file_path,
          mappingFileGenders: a.mapping_file_genders ?? undefined,
          bidirectional: a.bidirectional,
        },
        d,
      ),
  ),
  'person_name_perturbation.PersonNamePerturbation': entry(
    'PersonNamePerturbation(prob: float, source_class: Dict[str, str], target_class: Dict[str, str], name_file_path: Optional[str] = None, person_name_type: str = "first_name", preserve_gender: bool = True)',
    z.strictObject({
      prob: number,
      source_class: stringDict,
      target_class: stringDict,
      name_file_path: optionalString,
      person_name_type: z.string().optional(),
      preserve_gender: z.boolean().optional(),
    }),
    (a, d) =>
      PersonNamePerturbation.create(
        {
          prob: a.prob,
          sourceClass: a.source_class,
          targetClass: a.target_class,
          nameFilePath: a.name_file_path,
          personNameType: a.person_name_type,
          preserveGender: a.preserve_gender,
        },
        d,
      ),
  ),
  'synonym_perturbation.SynonymPerturbation': entry('SynonymPerturbation(prob: float)', z.strictObject({ prob: number }), (a) => new SynonymPerturbation(a.prob)),
  'contrast_sets_perturbation.ContrastSetsPerturbation': entry('ContrastSetsPerturbation()', z.strictObject({}), () => new ContrastSetsPerturbation()),
};

/** The `class_name`s {@link createPerturbation} accepts. */
export const PERTURBATION_CLASS_NAMES: readonly string[] = Object.keys(PERTURBATIONS).map((k) => PREFIX + k);

/**
 * HELM's `create_perturbation(spec)`: the perturbation named by `spec.class_name`, built from `spec.args` (a plain
 * object or a Map, as parsed). Loads the word lists or mapping files the perturbation needs (see {@link DataOptions}).
 */
export async function createPerturbation(spec: PerturbationSpec, data: DataOptions = {}): Promise<Perturbation> {
  const known = spec.class_name.startsWith(PREFIX) ? PERTURBATIONS[spec.class_name.slice(PREFIX.length)] : undefined;
  if (!known) {
    throw new HelmError('ValueError', `Unknown perturbation class "${spec.class_name}"; HELM 0.2.1 has: ${PERTURBATION_CLASS_NAMES.join(', ')}.`);
  }
  const rawArgs: unknown = spec.args instanceof Map ? Object.fromEntries(spec.args) : spec.args;
  const parsed = known.schema.safeParse(rawArgs ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'args'}: ${issue.message}`).join('; ');
    throw new HelmError('TypeError', `Bad args for ${spec.class_name} (${problems}); it takes ${known.signature}.`);
  }
  return known.create(parsed.data as never, data);
}
