import { pyStrip } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TEST_SPLIT, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { z } from 'zod';
import { downloadSource } from './download-source.js';
import { readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const WIKIFACT_BUNDLE_URL = 'https://worksheets.codalab.org/rest/bundles/0x8c3b60eb7c6b462e822a150f194d3b35/contents/blob/';

/** WikiData property ids by the subject names HELM's run specs use (HELM's `NAME_TO_PID`, 86 relations). */
export const WIKIFACT_PROPERTIES: Readonly<Record<string, string>> = {
  genre: 'P136',
  instrument: 'P1303',
  author: 'P50',
  creator: 'P170',
  composer: 'P86',
  director: 'P57',
  applies_to_jurisdiction: 'P1001',
  overrules: 'P4006',
  laws_applied: 'P3014',
  repealed_by: 'P2568',
  majority_opinion_by: 'P5826',
  plaintiff: 'P1620',
  defendant: 'P1591',
  movement: 'P135',
  influenced_by: 'P737',
  member_of_political_party: 'P102',
  diplomatic_relation: 'P530',
  position_held: 'P39',
  basic_form_of_government: 'P122',
  office_held_by_head_of_state: 'P1906',
  head_of_state: 'P35',
  office_held_by_head_of_government: 'P1313',
  head_of_government: 'P6',
  shares_border_with: 'P47',
  continent: 'P30',
  capital: 'P36',
  capital_of: 'P1376',
  country: 'P17',
  twinned_administrative_body: 'P190',
  currency: 'P38',
  central_bank: 'P1304',
  subsidiary: 'P355',
  stock_exchange: 'P414',
  industry: 'P452',
  statement_describes: 'P2384',
  solved_by: 'P1136',
  programming_language: 'P277',
  file_extension: 'P1195',
  number_of_processor_cores: 'P1141',
  operating_system: 'P306',
  measured_physical_quantity: 'P111',
  recommended_unit_of_measurement: 'P8111',
  atomic_number: 'P1086',
  electron_configuration: 'P8000',
  discoverer_or_inventor: 'P61',
  time_of_discovery_or_invention: 'P575',
  location_of_discovery: 'P189',
  medical_condition_treated: 'P2175',
  drug_or_therapy_used_for_treatment: 'P2176',
  genetic_association: 'P2293',
  therapeutic_area: 'P4044',
  symptoms_and_signs: 'P780',
  place_of_birth: 'P19',
  place_of_death: 'P20',
  subclass_of: 'P279',
  official_language: 'P37',
  position_played_on_team: 'P413',
  member_of_sports_team: 'P54',
  award_received: 'P166',
  original_network: 'P449',
  educated_at: 'P69',
  named_after: 'P138',
  original_language_of_film_or_TV_show: 'P364',
  member_of: 'P463',
  field_of_work: 'P101',
  participating_team: 'P1923',
  occupation: 'P106',
  has_part: 'P527',
  manufacturer: 'P176',
  developer: 'P178',
  country_of_citizenship: 'P27',
  language_of_work_or_name: 'P407',
  located_in_the_administrative_territorial_entity: 'P131',
  languages_spoken_written_or_signed: 'P1412',
  employer: 'P108',
  record_label: 'P264',
  location: 'P276',
  work_location: 'P937',
  religion: 'P140',
  owned_by: 'P127',
  native_language: 'P103',
  instance_of: 'P31',
  country_of_origin: 'P495',
  headquarters_location: 'P159',
  location_of_formation: 'P740',
  part_of: 'P361',
};

const WIKIFACT_SPLITS: readonly (readonly [string, string])[] = [
  ['train', TRAIN_SPLIT],
  ['dev', VALID_SPLIT],
  ['test', TEST_SPLIT],
];

const wikifactLine = z.object({ property: z.string(), template: z.string(), result_names: z.unknown() });

/**
 * HELM's `WIKIFactScenario`: fact completion from WikiData triples. Reads `{train,dev,test}.jsonl`, keeps the lines
 * of one property; the input is the line's `template`, every (flattened) `result_names` entry, stripped, is a correct
 * reference.
 */
export class WIKIFactScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.wikifact_scenario.WIKIFactScenario';
  readonly className = WIKIFactScenario.className;
  readonly name = 'wikifact';
  readonly description = 'Fact Completion in WikiData';
  readonly tags = ['knowledge', 'generation'];
  readonly propertyId: string;

  constructor(readonly subject: string) {
    const pid = Object.hasOwn(WIKIFACT_PROPERTIES, subject) ? WIKIFACT_PROPERTIES[subject] : undefined;
    if (!pid) {
      throw new HelmError('AssertionError', `Invalid subject: ${subject}. Known subjects: ${Object.keys(WIKIFACT_PROPERTIES).join(', ')}.`);
    }
    this.propertyId = pid;
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const instances: Instance[] = [];
    for (const [fileSplit, split] of WIKIFACT_SPLITS) {
      const fileName = `${fileSplit}.jsonl`;
      const jsonPath = await downloadSource(context, this.name, { url: WIKIFACT_BUNDLE_URL + fileName, path: join('data', fileName) });
      context.log?.(`Reading ${jsonPath}`);
      (await readJsonLines(jsonPath)).forEach((parsed, i) => {
        const where = `line ${i + 1} of ${jsonPath}`;
        const row = wikifactLine.safeParse(parsed);
        if (!row.success) throw new HelmError('KeyError', `${where} lacks "property", "template" or "result_names" as WikiFact lines have them.`);
        if (row.data.property !== this.propertyId) return;
        const answers = flattenList(row.data.result_names).map((answer) => {
          if (typeof answer !== 'string') throw new HelmError('Exception', `AttributeError: ${where} has a non-string answer ${JSON.stringify(answer)}.`);
          return reference(pyStrip(answer), [CORRECT_TAG]);
        });
        instances.push(instance({ input: { text: row.data.template }, references: answers, split }));
      });
    }
    return instances;
  }
}

/** HELM's `flatten_list`: nested lists flattened depth-first; anything else is a one-element list. */
export function flattenList(value: unknown): unknown[] {
  return Array.isArray(value) ? value.flatMap(flattenList) : [value];
}

export const wikifactDefinition = defineScenario(WIKIFactScenario.className, { subject: stringArg() }, (args) => new WIKIFactScenario(args.subject));
