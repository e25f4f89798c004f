import { HelmError, type ScenarioSpec } from '@flexhelm/core';
import type { Scenario } from './scenario.js';
import type { ScenarioDefinition } from './scenario-definition.js';
import { shortClassName } from './scenario-definition.js';
import { syntheticReasoningDefinition } from './synthetic-reasoning-scenario.js';
import { srnDefinition } from './synthetic-reasoning-natural-scenario.js';
import { dyckLanguageDefinition } from './dyck-language-scenario.js';
import { numeracyDefinition } from './numeracy-scenario.js';
import { mmluDefinition } from './mmlu-scenario.js';
import { wikifactDefinition } from './wikifact-scenario.js';
import { summarizationDefinition } from './summarization-scenario.js';
import { boolqDefinition } from './boolq-scenario.js';
import { imdbDefinition } from './imdb-scenario.js';
import { commonsenseDefinition } from './commonsense-scenario.js';
import { truthfulQaDefinition } from './truthful-qa-scenario.js';
import { narrativeQaDefinition } from './narrative-qa-scenario.js';
import { gsmDefinition } from './gsm-scenario.js';
import { lsatQaDefinition } from './lsat-qa-scenario.js';
import { babiQaDefinition } from './babi-qa-scenario.js';
import { naturalQaDefinition } from './natural-qa-scenario.js';
import { bbqDefinition } from './bbq-scenario.js';
import { blimpDefinition } from './blimp-scenario.js';
import { wikitext103Definition } from './wikitext-103-scenario.js';
import { twitterAaeDefinition } from './twitter-aae-scenario.js';
import { quacDefinition } from './quac-scenario.js';
import { thePileDefinition } from './the-pile-scenario.js';
import { legalSupportDefinition } from './legal-support-scenario.js';
import { msmarcoDefinition } from './msmarco-scenario.js';
import { syntheticEfficiencyDefinition } from './synthetic-efficiency-scenario.js';
import { civilCommentsDefinition } from './civil-comments-scenario.js';
import { entityDataImputationDefinition } from './entity-data-imputation-scenario.js';
import { entityMatchingDefinition } from './entity-matching-scenario.js';
import { mathDefinition } from './math-scenario.js';
import { raftDefinition } from './raft-scenario.js';

/** Every scenario class flexhelm can build, one line each (a new scenario module adds its definition here). */
const DEFINITIONS: readonly ScenarioDefinition[] = [
  syntheticReasoningDefinition,
  srnDefinition,
  dyckLanguageDefinition,
  numeracyDefinition,
  mmluDefinition,
  wikifactDefinition,
  summarizationDefinition,
  boolqDefinition,
  imdbDefinition,
  commonsenseDefinition,
  truthfulQaDefinition,
  narrativeQaDefinition,
  gsmDefinition,
  lsatQaDefinition,
  babiQaDefinition,
  naturalQaDefinition,
  bbqDefinition,
  blimpDefinition,
  wikitext103Definition,
  twitterAaeDefinition,
  quacDefinition,
  thePileDefinition,
  legalSupportDefinition,
  msmarcoDefinition,
  syntheticEfficiencyDefinition,
  civilCommentsDefinition,
  entityDataImputationDefinition,
  entityMatchingDefinition,
  mathDefinition,
  raftDefinition,
];

const BY_CLASS_NAME: ReadonlyMap<string, ScenarioDefinition> = new Map(DEFINITIONS.map((d) => [d.className, d]));

/** The HELM class names the registry knows, in registration order. */
export function registeredScenarioClassNames(): string[] {
  return DEFINITIONS.map((d) => d.className);
}

/** The definition for a HELM scenario class name, if registered. */
export function scenarioDefinition(className: string): ScenarioDefinition | undefined {
  return BY_CLASS_NAME.get(className);
}

/**
 * HELM's `create_scenario(scenario_spec)`: the scenario named by `class_name`, built from `args`. An unknown class or
 * bad arguments raise a HelmError that names the problem and the accepted values.
 */
export function createScenario(spec: ScenarioSpec): Scenario {
  const definition = BY_CLASS_NAME.get(spec.class_name);
  if (definition) return definition.create(spec.args ?? {});
  const short = shortClassName(spec.class_name);
  const sameShortName = DEFINITIONS.filter((d) => shortClassName(d.className) === short).map((d) => d.className);
  const hint = sameShortName.length
    ? `did you mean ${sameShortName.join(' or ')}? Class names must be fully qualified.`
    : `known scenario classes: ${DEFINITIONS.map((d) => d.className).join(', ')}.`;
  // Python's create_object fails importing the module (ModuleNotFoundError) or reading the attribute (AttributeError).
  throw new HelmError('ValueError', `Unknown scenario class ${JSON.stringify(spec.class_name)}: ${hint}`);
}
