import { pyFloat as f } from '@flexhelm/python-compat';
import { objectSpec, type ArgValue, type PerturbationSpec } from '@flexhelm/core';

const AUG = 'helm.benchmark.augmentations';
const spec = (moduleAndClass: string, args: Record<string, ArgValue> = {}): PerturbationSpec => objectSpec(`${AUG}.${moduleAndClass}`, args);

// Builders for each perturbation's spec; argument names, order and defaults (None → null) are HELM's.
const extraSpace = (numSpaces: number) => spec('extra_space_perturbation.ExtraSpacePerturbation', { num_spaces: numSpaces });
const space = (maxSpaces: number) => spec('space_perturbation.SpacePerturbation', { max_spaces: maxSpaces });
const lower = () => spec('lowercase_perturbation.LowerCasePerturbation');
const misspelling = (prob: ArgValue) => spec('misspelling_perturbation.MisspellingPerturbation', { prob });
const synonym = (prob: ArgValue) => spec('synonym_perturbation.SynonymPerturbation', { prob });
const contrastSets = () => spec('contrast_sets_perturbation.ContrastSetsPerturbation');
const typo = (prob: ArgValue) => spec('typos_perturbation.TyposPerturbation', { prob });
const filler = (prob: ArgValue) => spec('filler_words_perturbation.FillerWordsPerturbation', { insert_prob: prob, speaker_ph: false });
const mildMix = () => spec('mild_mix_perturbation.MildMixPerturbation');
const contractAndExpand = () =>
  ['Contraction', 'Expansion'].map((mode) => spec(`contraction_expansion_perturbation.${mode}Perturbation`));
const dialect = (prob: ArgValue, sourceClass: string, targetClass: string) =>
  spec('dialect_perturbation.DialectPerturbation', { prob, source_class: sourceClass, target_class: targetClass, mapping_file_path: null });
const personName = (
  prob: ArgValue,
  sourceClass: Record<string, string>,
  targetClass: Record<string, string>,
  personNameType: string,
  preserveGender: boolean,
) =>
  spec('person_name_perturbation.PersonNamePerturbation', {
    prob,
    source_class: sourceClass,
    target_class: targetClass,
    name_file_path: null,
    person_name_type: personNameType,
    preserve_gender: preserveGender,
  });
const gender = (mode: string, prob: ArgValue, sourceClass: string, targetClass: string) =>
  spec('gender_perturbation.GenderPerturbation', {
    mode,
    prob,
    source_class: sourceClass,
    target_class: targetClass,
    mapping_file_path: null,
    mapping_file_genders: null,
    bidirectional: false,
  });

const WHITE_AMERICAN = { race: 'white_american' };
const BLACK_AMERICAN = { race: 'black_american' };

const robustnessSpecs = () => [mildMix()];
const fairnessSpecs = () => [
  dialect(f(1), 'SAE', 'AAVE'),
  gender('pronouns', f(1), 'male', 'female'),
  personName(f(1), WHITE_AMERICAN, BLACK_AMERICAN, 'first_name', true),
];

/**
 * HELM's `PERTURBATION_SPECS_DICT`: `data_augmentation=<name>` → {augmentation name → perturbation specs}; each
 * augmentation name becomes one RunSpec named `...,data_augmentation=<augmentation name>`.
 */
export const PERTURBATION_SPECS: ReadonlyMap<string, ReadonlyMap<string, readonly PerturbationSpec[]>> = new Map(
  (
    [
      ['extra_space', [['extra_space2', [extraSpace(2)]]]],
      ['contrast_sets', [['contrast_sets', [contrastSets()]]]],
      ['space', [['space3', [space(3)]]]],
      ['lower', [['lower', [lower()]]]],
      ['contract', [['contract', contractAndExpand()]]],
      ['filler', [['filler0.3', [filler(0.3)]]]],
      ['misspelling_mild', [['misspelling0.05', [misspelling(0.05)]]]],
      ['misspelling_medium', [['misspelling0.20', [misspelling(0.2)]]]],
      ['misspelling_hard', [['misspelling0.5', [misspelling(0.5)]]]],
      ['misspelling_sweep', [0, 0.05, 0.2, 0.5].map((prob) => [`misspelling${prob}`, [misspelling(prob)]])],
      ['typo_easy', [['typo0.1', [typo(0.1)]]]],
      ['typo_medium', [['typo0.3', [typo(0.3)]]]],
      ['typo_hard', [['typo0.5', [typo(0.5)]]]],
      ['synonym', [['synonym0.5', [synonym(0.5)]]]],
      ['dialect_easy', [['dialect_easy_prob=0.1_source=SAE_target=AAVE', [dialect(0.1, 'SAE', 'AAVE')]]]],
      ['dialect_medium', [['dialect_prob=0.3_source=SAE_target=AAVE', [dialect(0.3, 'SAE', 'AAVE')]]]],
      ['dialect_hard', [['dialect_prob=0.5_source=SAE_target=AAVE', [dialect(0.5, 'SAE', 'AAVE')]]]],
      ['dialect_deterministic', [['dialect_prob=1.0_source=SAE_target=AAVE', [dialect(f(1), 'SAE', 'AAVE')]]]],
      [
        'person_name_first_hard_preserve_gender',
        [['person_name_first_prob=0.5_source=white_target=black_preserve_gender=True', [personName(0.5, WHITE_AMERICAN, BLACK_AMERICAN, 'first_name', true)]]],
      ],
      [
        'person_name_first_hard_dont_preserve_gender',
        [['person_name_first_prob=0.5_source=white_target=black_preserve_gender=False', [personName(0.5, WHITE_AMERICAN, BLACK_AMERICAN, 'first_name', false)]]],
      ],
      [
        'person_name_first_deterministic',
        [['person_name_first_prob=1.0_source=white_target=black_preserve_gender=True', [personName(f(1), WHITE_AMERICAN, BLACK_AMERICAN, 'first_name', true)]]],
      ],
      [
        'person_name_last_deterministic',
        [['person_name_last_prob=1.0_source=white_target=hispanic', [personName(f(1), { race: 'white' }, { race: 'hispanic' }, 'last_name', false)]]],
      ],
      [
        'person_name_last_hard',
        [['person_name_last_prob=0.5_source=white_target=hispanic', [personName(0.5, { race: 'white' }, { race: 'hispanic' }, 'last_name', false)]]],
      ],
      ...(['terms', 'pronouns'] as const).flatMap((mode) =>
        (
          [
            ['easy', 0.1, '0.1'],
            ['medium', 0.3, '0.3'],
            ['hard', 0.5, '0.5'],
            ['deterministic', f(1), '1.0'],
          ] as const
        ).map(([level, prob, probText]) => [
          `gender_${mode}_${level}`,
          [[`gender_${mode}_prob=${probText}_source=male_target=female`, [gender(mode, prob, 'male', 'female')]]],
        ]),
      ),
      ['robustness', [['robustness', robustnessSpecs()]]],
      ['fairness', [['fairness', fairnessSpecs()]]],
      ['canonical', [['canonical', [...robustnessSpecs(), ...fairnessSpecs()]]]],
      [
        'robustness_all',
        [['robustness_all', [...contractAndExpand(), filler(0.1), lower(), misspelling(0.1), space(3), synonym(0.1), typo(0.01)]]],
      ],
    ] as [string, [string, PerturbationSpec[]][]][]
  ).map(([name, options]) => [name, new Map(options)]),
);
