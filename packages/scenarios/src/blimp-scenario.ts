
import { CORRECT_TAG, HelmError, TEST_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { joinInside } from './join-inside.js';
import { downloadSource } from './download-source.js';
import { jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const BLIMP_URL = 'https://github.com/alexwarstadt/blimp/blob/master/BLiMP.zip?raw=true';

/** The BLiMP paradigms of each phenomenon, in HELM's order. */
export const BLIMP_PARADIGMS: Readonly<Record<string, readonly string[]>> = {
  island_effects: ['left_branch_island_simple_question', 'sentential_subject_island', 'wh_island', 'coordinate_structure_constraint_object_extraction', 'coordinate_structure_constraint_complex_left_branch', 'adjunct_island', 'complex_NP_island', 'left_branch_island_echo_question'],
  anaphor_agreement: ['anaphor_gender_agreement', 'anaphor_number_agreement'],
  argument_structure: ['animate_subject_passive', 'animate_subject_trans', 'transitive', 'passive_1', 'intransitive', 'passive_2', 'causative', 'drop_argument', 'inchoative'],
  determiner_noun_agreement: ['determiner_noun_agreement_with_adj_irregular_2', 'determiner_noun_agreement_1', 'determiner_noun_agreement_with_adj_irregular_1', 'determiner_noun_agreement_irregular_1', 'determiner_noun_agreement_irregular_2', 'determiner_noun_agreement_with_adjective_1', 'determiner_noun_agreement_2', 'determiner_noun_agreement_with_adj_2'],
  subject_verb_agreement: ['distractor_agreement_relative_clause', 'irregular_plural_subject_verb_agreement_2', 'irregular_plural_subject_verb_agreement_1', 'regular_plural_subject_verb_agreement_1', 'distractor_agreement_relational_noun', 'regular_plural_subject_verb_agreement_2'],
  ellipsis: ['ellipsis_n_bar_1', 'ellipsis_n_bar_2'],
  control_raising: ['expletive_it_object_raising', 'tough_vs_raising_1', 'existential_there_subject_raising', 'tough_vs_raising_2', 'existential_there_object_raising'],
  quantifiers: ['existential_there_quantifiers_1', 'superlative_quantifiers_1', 'superlative_quantifiers_2', 'existential_there_quantifiers_2'],
  irregular_forms: ['irregular_past_participle_verbs', 'irregular_past_participle_adjectives'],
  npi_licensing: ['sentential_negation_npi_licensor_present', 'matrix_question_npi_licensor_present', 'sentential_negation_npi_scope', 'only_npi_licensor_present', 'only_npi_scope', 'npi_present_2', 'npi_present_1'],
  binding: ['principle_A_domain_2', 'principle_A_domain_3', 'principle_A_case_1', 'principle_A_case_2', 'principle_A_reconstruction', 'principle_A_c_command', 'principle_A_domain_1'],
  filler_gap_dependency: ['wh_vs_that_with_gap', 'wh_vs_that_no_gap', 'wh_questions_object_gap', 'wh_vs_that_no_gap_long_distance', 'wh_questions_subject_gap', 'wh_questions_subject_gap_long_distance', 'wh_vs_that_with_gap_long_distance'],
};

/**
 * HELM's `BLiMPScenario`: minimal pairs of one linguistic phenomenon, each an instance with empty input, the good
 * sentence (correct) and the bad one as references, all in the test split.
 */
export class BLiMPScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.blimp_scenario.BLiMPScenario';
  readonly className = BLiMPScenario.className;
  readonly name = 'blimp';
  readonly description = 'The Benchmark of Linguistic Minimal Pairs for English';
  readonly tags = ['linguistic_knowledge', 'language_modeling', 'minimal_pairs'];

  constructor(readonly phenomenon: string) {
    if (!Object.hasOwn(BLIMP_PARADIGMS, phenomenon)) {
      throw new HelmError('AssertionError', `Unsupported phenomenon: ${phenomenon}. Use one of ${Object.keys(BLIMP_PARADIGMS).join(', ')}.`);
    }
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const dataPath = await downloadSource(context, this.name, { url: BLIMP_URL, path: 'data', unpack: 'zip' });
    const instances: Instance[] = [];
    for (const paradigm of BLIMP_PARADIGMS[this.phenomenon]!) { // checked in the constructor
      const path = joinInside(dataPath, 'data', `${paradigm}.jsonl`);
      context.log?.(`Reading ${path}`);
      (await readJsonLines(path)).forEach((example, i) => {
        const where = `line ${i + 1} of ${path}`;
        instances.push(
          instance({
            input: { text: '' },
            references: [reference(jsonString(example, 'sentence_good', where), [CORRECT_TAG]), reference(jsonString(example, 'sentence_bad', where), [])],
            split: TEST_SPLIT,
          }),
        );
      });
    }
    return instances;
  }
}

export const blimpDefinition = defineScenario(BLiMPScenario.className, { phenomenon: stringArg() }, (args) => new BLiMPScenario(args.phenomenon));
