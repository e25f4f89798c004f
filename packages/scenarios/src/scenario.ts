import { join } from 'node:path';
import type { Instance } from '@flexhelm/core';

/**
 * What a scenario may use while producing its instances. Procedural scenarios ignore it; download scenarios keep their
 * raw files under `outputPath` (HELM's `scenario.output_path`) and honour the rest.
 */
export interface ScenarioContext {
  /** HELM's `scenario.output_path`: `<output>/scenarios/<scenario name>` (see {@link scenarioOutputPath}). */
  outputPath: string;
  /** A shared cache of downloaded source files that several runs (and suites) can reuse; defaults to `outputPath`. */
  dataDir?: string;
  /** Never touch the network: fail with a clear message when a needed file is not cached yet. */
  offline?: boolean;
  /** Fetch source files from this base URL instead of the original host (a mirror, or a loopback server in tests). */
  baseUrl?: string;
  /** Aborts long downloads or generation. */
  signal?: AbortSignal;
  /** Progress messages (HELM's `hlog`). */
  log?: (message: string) => void;
}

/** A HELM scenario: a task plus data distribution, turned into a list of instances by {@link Scenario.getInstances}. */
export interface Scenario {
  /** HELM's `Scenario.name` (also the folder under `scenarios/`), e.g. `synthetic_reasoning`. */
  readonly name: string;
  readonly description: string;
  readonly tags: readonly string[];
  /** The fully qualified HELM class this scenario reproduces, e.g. `helm.benchmark.scenarios.dyck_language_scenario.DyckLanguageScenario`. */
  readonly className: string;
  /** The instances in HELM's order, with splits, tags and references, before `with_instance_ids`. */
  getInstances(context: ScenarioContext): Promise<Instance[]>;
}

/** HELM's `scenario.json`: the dataclass fields of `Scenario`, in order. */
export interface ScenarioJson {
  name: string;
  description: string;
  tags: string[];
  output_path: string;
  definition_path: string;
}

/** Where HELM's `__post_init__` points `definition_path` when HELM runs from a source checkout. */
export const HELM_SOURCE_URL = 'https://github.com/stanford-crfm/helm/blob/main/src/';

/**
 * HELM's `Scenario.definition_path` for a class name: the source file of its module under `sourceRoot`.
 * HELM installed from a wheel (as FlexLLMGen does) has no `/src/` in the path and writes the absolute site-packages
 * path instead; pass that directory (ending in `/`) as `sourceRoot` to reproduce it.
 */
export function definitionPath(className: string, sourceRoot: string = HELM_SOURCE_URL): string {
  const modulePath = className.split('.').slice(0, -1).join('/');
  return `${sourceRoot}${modulePath}.py`;
}

/** HELM's `Runner`: `scenario.output_path = <output path>/scenarios/<scenario.name>`. */
export function scenarioOutputPath(outputRoot: string, scenarioName: string): string {
  return join(outputRoot, 'scenarios', scenarioName);
}

/**
 * The object HELM writes as `scenario.json` (dump it with core's `helmJson`). `outputPath` is what the runner set
 * (HELM's default is `""`).
 */
export function scenarioJson(scenario: Scenario, outputPath = '', sourceRoot: string = HELM_SOURCE_URL): ScenarioJson {
  return {
    name: scenario.name,
    description: scenario.description,
    tags: [...scenario.tags],
    output_path: outputPath,
    definition_path: definitionPath(scenario.className, sourceRoot),
  };
}
