import type { ArgValue, ObjectSpec } from '@flexhelm/core';
import { PyFloat, pyError, pyStr, shortRepr } from '@flexhelm/python-compat';

/**
 * Scenario arguments that become file names (`mmlu:subject=…` → `data/test/<subject>_test.csv`) are checked here,
 * when a description becomes RunSpecs, so a hostile value is refused before any data file is touched. HELM 0.2.1
 * checks them only inside the scenario (or not at all, as for MMLU), which is why {@link checkScenarioSpec} is not part
 * of HELM's behaviour and can be switched off to compare with HELM.
 */

/** A value allowed where HELM has no list: one path segment of letters, digits, `_`, `-`, with inner dots only. */
export const PLAIN_NAME = /^[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*$/;
const MAX_NAME_LENGTH = 100;

const words = (text: string): readonly string[] => text.split(' ');

/** The 57 MMLU subjects of HELM 0.2.1's `presentation/run_specs.conf` (the files of `data.tar`). */
export const MMLU_SUBJECTS = words('abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology college_chemistry college_computer_science college_mathematics college_medicine college_physics computer_security conceptual_physics econometrics electrical_engineering elementary_mathematics formal_logic global_facts high_school_biology high_school_chemistry high_school_computer_science high_school_european_history high_school_geography high_school_government_and_politics high_school_macroeconomics high_school_mathematics high_school_microeconomics high_school_physics high_school_psychology high_school_statistics high_school_us_history high_school_world_history human_aging human_sexuality international_law jurisprudence logical_fallacies machine_learning management marketing medical_genetics miscellaneous moral_disputes moral_scenarios nutrition philosophy prehistory professional_accounting professional_law professional_medicine professional_psychology public_relations security_studies sociology us_foreign_policy virology world_religions');

/** `PID_TO_NAME` of HELM 0.2.1's `wikifact_scenario.py`. */
const WIKIFACT_SUBJECTS = words('applies_to_jurisdiction atomic_number author award_received basic_form_of_government capital capital_of central_bank composer continent country country_of_citizenship country_of_origin creator currency defendant developer diplomatic_relation director discoverer_or_inventor drug_or_therapy_used_for_treatment educated_at electron_configuration employer field_of_work file_extension genetic_association genre has_part head_of_government head_of_state headquarters_location industry influenced_by instance_of instrument language_of_work_or_name languages_spoken_written_or_signed laws_applied located_in_the_administrative_territorial_entity location location_of_discovery location_of_formation majority_opinion_by manufacturer measured_physical_quantity medical_condition_treated member_of member_of_political_party member_of_sports_team movement named_after native_language number_of_processor_cores occupation office_held_by_head_of_government office_held_by_head_of_state official_language operating_system original_language_of_film_or_TV_show original_network overrules owned_by part_of participating_team place_of_birth place_of_death plaintiff position_held position_played_on_team programming_language recommended_unit_of_measurement record_label religion repealed_by shares_border_with solved_by statement_describes stock_exchange subclass_of subsidiary symptoms_and_signs therapeutic_area time_of_discovery_or_invention twinned_administrative_body work_location');

const THE_PILE_SUBSETS = [
  'ArXiv', 'BookCorpus2', 'Books3', 'DM Mathematics', 'Enron Emails', 'EuroParl', 'FreeLaw', 'Github', 'Gutenberg (PG-19)', 'HackerNews',
  'NIH ExPorter', 'OpenSubtitles', 'OpenWebText2', 'PhilPapers', 'Pile-CC', 'PubMed Abstracts', 'PubMed Central', 'StackExchange',
  'USPTO Backgrounds', 'Ubuntu IRC', 'Wikipedia (en)', 'YoutubeSubtitles',
];

/** What one scenario argument may be. */
interface ArgumentRule {
  /** HELM's own list of values (from the scenario's source); absent: any plain name. */
  values?: readonly string[];
  /** A check of its own with a description of what it accepts (bAbI's task number). */
  accepts?: { test: (value: ArgValue) => boolean; allowed: string };
  /** `None` (the scenario's default) is accepted. */
  optional?: boolean;
  /** The empty string is accepted (BIG-bench's "no subtask"). */
  empty?: boolean;
}

// Python's int() of a description value: ints and floats (truncated); other strings are not numbers.
function babiTask(value: ArgValue): boolean {
  if (value === 'all') return true;
  const n = value instanceof PyFloat ? Math.trunc(value.value) : typeof value === 'number' ? Math.trunc(value) : NaN;
  return n >= 1 && n <= 20;
}

function tokenizerName(value: ArgValue): boolean {
  if (typeof value !== 'string') return false;
  const parts = value.split('/');
  return parts.length === 2 && parts.every(plainName);
}

function plainName(value: string): boolean {
  return value.length <= MAX_NAME_LENGTH && PLAIN_NAME.test(value);
}

const list = (text: string): ArgumentRule => ({ values: words(text) });
const NAME: ArgumentRule = {};

/**
 * HELM scenario class (below `helm.benchmark.scenarios.`) → the arguments it turns into file names, checked against
 * HELM's list where it has one. Arguments that name no file (synthetic_reasoning's or natural_qa's `mode`) are left
 * to the scenario, which refuses a bad one with HELM's own message when the run is submitted or starts.
 */
const RULES: ReadonlyMap<string, Readonly<Record<string, ArgumentRule>>> = new Map<string, Record<string, ArgumentRule>>([
  ['mmlu_scenario.MMLUScenario', { subject: { values: MMLU_SUBJECTS } }],
  ['interactive_qa_mmlu_scenario.InteractiveQAMMLUScenario', { subject: list('college_chemistry global_facts miscellaneous nutrition us_foreign_policy') }],
  ['bbq_scenario.BBQScenario', { subject: list('all Age Disability_status Gender_identity Nationality Physical_appearance Race_ethnicity Race_x_SES Race_x_gender Religion SES Sexual_orientation') }],
  ['bold_scenario.BOLDScenario', { subject: list('all gender political_ideology profession race religious_ideology') }],
  ['civil_comments_scenario.CivilCommentsScenario', { demographic: list('all male female LGBTQ christian muslim other_religions black white') }],
  ['wikifact_scenario.WIKIFactScenario', { subject: { values: WIKIFACT_SUBJECTS } }],
  ['commonsense_scenario.CommonSenseScenario', { dataset: list('hellaswag openbookqa commonsenseqa piqa siqa') }],
  ['truthful_qa_scenario.TruthfulQAScenario', { task: list('mc_single') }],
  ['twitter_aae_scenario.TwitterAAEScenario', { demographic: list('aa white') }],
  ['raft_scenario.RAFTScenario', {
    subset: list('ade_corpus_v2 banking_77 neurips_impact_statement_risks one_stop_english overruling semiconductor_org_types systematic_review_inclusion tai_safety_research terms_of_service tweet_eval_hate twitter_complaints'),
  }],
  ['math_scenario.MATHScenario', { subject: list('number_theory intermediate_algebra algebra prealgebra geometry counting_and_probability precalculus') }],
  ['lsat_qa_scenario.LSATScenario', { task: list('all grouping ordering assignment miscellaneous') }],
  ['babi_qa_scenario.BabiQAScenario', { task: { accepts: { test: babiTask, allowed: 'all or a task number from 1 to 20' } } }],
  ['copyright_scenario.CopyrightScenario', {
    datatag: list(
      'pilot n_books_1000-extractions_per_book_1-prefix_length_5 n_books_1000-extractions_per_book_1-prefix_length_25 ' +
        'n_books_1000-extractions_per_book_1-prefix_length_125 n_books_1000-extractions_per_book_3-prefix_length_5 ' +
        'n_books_1000-extractions_per_book_3-prefix_length_25 n_books_1000-extractions_per_book_3-prefix_length_125 ' +
        'popular_books-prefix_length_5.json popular_books-prefix_length_10.json popular_books-prefix_length_25.json ' +
        'popular_books-prefix_length_50.json popular_books-prefix_length_125.json popular_books-prefix_length_250.json oh_the_places ' +
        'prompt_num_line_1-min_lines_20.json prompt_num_line_5-min_lines_20.json prompt_num_line_10-min_lines_20.json',
    ),
  }],
  ['disinformation_scenario.DisinformationScenario', { capability: list('reiteration wedging'), topic: { optional: true } }],
  ['code_scenario.CodeScenario', { dataset: list('humaneval apps') }],
  ['the_pile_scenario.ThePileScenario', { subset: { values: THE_PILE_SUBSETS } }],
  ['ice_scenario.ICEScenario', {
    subset: { ...list('can ja hk ind sin phi usa ea irl'), optional: true },
    gender: { ...list('male female'), optional: true },
    category: list('all S W S1 S2 W1 W2'),
  }],
  // HELM lists 12 tokenizers, but \`tokenizer=default\` puts every model's tokenizer here; the scenario names the ones
  // it has no prompts for when it runs, as HELM does.
  ['synthetic_efficiency_scenario.SyntheticEfficiencyScenario', { tokenizer: { accepts: { test: tokenizerName, allowed: 'an organization/name tokenizer such as huggingface/gpt2' }, optional: true } }],
  ['blimp_scenario.BLiMPScenario', {
    phenomenon: list('island_effects anaphor_agreement argument_structure determiner_noun_agreement subject_verb_agreement ellipsis control_raising quantifiers irregular_forms npi_licensing binding filler_gap_dependency'),
  }],
  ['entity_matching_scenario.EntityMatchingScenario', {
    dataset: list('Beer iTunes_Amazon Fodors_Zagats DBLP_ACM DBLP_GoogleScholar Amazon_Google Walmart_Amazon Abt_Buy Company Dirty_iTunes_Amazon Dirty_DBLP_ACM Dirty_DBLP_GoogleScholar Dirty_Walmart_Amazon'),
  }],
  ['entity_data_imputation_scenario.EntityDataImputationScenario', { dataset: list('Buy Restaurant') }],
  ['big_bench_scenario.BIGBenchScenario', { task: NAME, subtask: { empty: true } }],
  ['med_dialog_scenario.MedDialogScenario', { subset: list('healthcaremagic icliniq') }],
]);

function allowedText(rule: ArgumentRule): string {
  if (rule.accepts) return rule.accepts.allowed;
  if (rule.values) return `one of ${rule.values.join(', ')}`;
  return `a plain name (letters, digits, _ and -, with dots only between them, at most ${MAX_NAME_LENGTH} characters)`;
}

function accepted(rule: ArgumentRule, value: ArgValue): boolean {
  if (value === null) return rule.optional === true;
  if (rule.empty && value === '') return true;
  if (rule.accepts) return rule.accepts.test(value);
  if (rule.values) return typeof value === 'string' && rule.values.includes(value);
  // A number becomes its str() in the path (\`big_bench:subtask=0\`).
  return (typeof value === 'string' || typeof value === 'number' || value instanceof PyFloat) && plainName(pyStr(value));
}

/**
 * Checks the arguments of a RunSpec's `scenario_spec` that name files: each must be one of HELM's values for it, or a
 * plain name where HELM has no list. Throws a ValueError naming the argument, the value and what is allowed.
 */
export function checkScenarioSpec(scenarioSpec: ObjectSpec): void {
  const rules = RULES.get(scenarioSpec.class_name.replace(/^helm\.benchmark\.scenarios\./, ''));
  if (!rules) return;
  const args = scenarioSpec.args as Record<string, ArgValue>;
  for (const [name, rule] of Object.entries(rules)) {
    if (!Object.hasOwn(args, name)) continue;
    const value = args[name];
    if (accepted(rule, value)) continue;
    const scenarioName = scenarioSpec.class_name.split('.').pop();
    throw pyError(
      'ValueError',
      `${scenarioName}: ${name}=${shortRepr(value)} is not allowed: ${name} names the scenario's data files, so it must be ${allowedText(rule)}`,
    );
  }
}
