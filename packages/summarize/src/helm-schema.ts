import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HelmError } from '@flexhelm/core';
import { DownloadError, ensureFileDownloaded, resolveDataDir } from '@flexhelm/downloads';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/**
 * HELM 0.2.1's `schema.yaml` (models, metrics, perturbations, metric groups, run groups): HELM's data, read at run
 * time from a HELM v0.2.1 checkout or downloaded once, pinned by SHA-256 like the perturbation word lists.
 */
export const HELM_SCHEMA_SHA256 = '5e05c371debb86f84608e4c5289186ca6220973612f232fc42337670ede08b54';
const SCHEMA_URL = 'https://raw.githubusercontent.com/stanford-crfm/helm/v0.2.1/src/helm/benchmark/static/schema.yaml';
const SCHEMA_IN_CHECKOUT = 'src/helm/benchmark/static/schema.yaml';

/** `Field`: what HELM shows for a model, metric, perturbation or adapter field. */
export interface SchemaField {
  name: string;
  display_name?: string;
  short_display_name?: string;
  description?: string;
  lower_is_better?: boolean;
}

/** `MetricNameMatcher{name, split, sub_split=None, perturbation_name=None}`. */
export interface MetricNameMatcher {
  name: string;
  split: string;
  sub_split?: string;
  perturbation_name?: string;
}

export interface MetricGroup extends SchemaField {
  metrics: MetricNameMatcher[];
}

export interface TaxonomyInfo {
  task?: string;
  what?: string;
  when?: string;
  who?: string;
  language?: string;
}

/** `RunGroup` with HELM's defaults filled in. */
export interface RunGroup extends SchemaField {
  metric_groups: string[];
  subgroups: string[];
  sub_splits?: string[];
  subgroup_display_mode: string;
  subgroup_metric_groups_hidden: string[];
  environment: Record<string, string>;
  category: string;
  visibility: string;
  taxonomy?: TaxonomyInfo;
  todo: boolean;
  adapter_keys_shown: string[];
}

export interface HelmSchema {
  models: SchemaField[];
  adapter: SchemaField[];
  metrics: SchemaField[];
  perturbations: SchemaField[];
  metric_groups: MetricGroup[];
  run_groups: RunGroup[];
  nameToModel: Map<string, SchemaField>;
  nameToMetric: Map<string, SchemaField>;
  nameToPerturbation: Map<string, SchemaField>;
  nameToMetricGroup: Map<string, MetricGroup>;
  nameToRunGroup: Map<string, RunGroup>;
}

export const BY_METRIC = 'by_metric';
export const BY_GROUP = 'by_group';
export const ALL_GROUPS = 'all_groups';
export const THIS_GROUP_ONLY = 'this_group_only';
export const NO_GROUPS = 'no_groups';

// YAML nulls become undefined (Python's None), the way dacite leaves an Optional field unset.
const opt = <T extends z.ZodType>(t: T) => t.nullish().transform((v) => v ?? undefined);
const str = z.union([z.string(), z.number(), z.boolean()]).transform(String);

const fieldShape = {
  name: z.string(),
  display_name: opt(str),
  short_display_name: opt(str),
  description: opt(str),
  lower_is_better: opt(z.boolean()),
};

const schemaSchema = z.object({
  models: z.array(z.looseObject(fieldShape)),
  adapter: z.array(z.looseObject(fieldShape)),
  metrics: z.array(z.object(fieldShape)),
  perturbations: z.array(z.object(fieldShape)),
  metric_groups: z.array(
    z.object({
      ...fieldShape,
      metrics: z.array(z.object({ name: z.string(), split: z.string(), sub_split: opt(z.string()), perturbation_name: opt(z.string()) })).default([]),
    }),
  ),
  run_groups: z.array(
    z.object({
      ...fieldShape,
      metric_groups: z.array(z.string()).default([]),
      subgroups: z.array(z.string()).default([]),
      sub_splits: opt(z.array(z.string())),
      subgroup_display_mode: z.string().default(BY_METRIC),
      subgroup_metric_groups_hidden: z.array(z.string()).default([]),
      environment: z.record(z.string(), str).default({}),
      category: z.string().default('Scenarios'),
      visibility: z.string().default(ALL_GROUPS),
      taxonomy: opt(z.object({ task: opt(str), what: opt(str), when: opt(str), who: opt(str), language: opt(str) })),
      todo: z.boolean().default(false),
      adapter_keys_shown: z.array(z.string()).default(['model']),
    }),
  ),
});

/** `Field.get_short_display_name()`. */
export function shortDisplayName(field: SchemaField): string {
  return field.short_display_name || field.display_name || field.name;
}

/** Parses schema.yaml's text (PyYAML's `safe_load` reads YAML 1.1) into a checked {@link HelmSchema}. */
export function parseHelmSchema(text: string, path = 'schema.yaml'): HelmSchema {
  let raw: unknown;
  try {
    raw = parseYaml(text, { version: '1.1' });
  } catch (err) {
    throw new HelmError('ValueError', `${path} is not valid YAML: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
  const result = schemaSchema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new HelmError('ValueError', `${path} does not look like HELM 0.2.1's schema.yaml at ${issue.path.join('.') || '(top)'}: ${issue.message}`);
  }
  const s = result.data as Omit<HelmSchema, `nameTo${string}`>;
  const byName = <T extends { name: string }>(items: T[]) => new Map(items.map((i) => [i.name, i] as const));
  const schema: HelmSchema = {
    ...s,
    nameToModel: byName(s.models),
    nameToMetric: byName(s.metrics),
    nameToPerturbation: byName(s.perturbations),
    nameToMetricGroup: byName(s.metric_groups),
    nameToRunGroup: byName(s.run_groups),
  };
  for (const group of schema.run_groups) {
    for (const name of [...group.subgroups]) {
      if (!schema.nameToRunGroup.has(name)) throw new HelmError('ValueError', `${path}: run group ${group.name} lists subgroup ${name}, which is not defined`);
    }
    for (const name of group.metric_groups) {
      if (!schema.nameToMetricGroup.has(name)) throw new HelmError('ValueError', `${path}: run group ${group.name} lists metric group ${name}, which is not defined`);
    }
  }
  return schema;
}

export interface LoadHelmSchemaOptions {
  /** A HELM v0.2.1 checkout; default `$FLEXHELM_HELM_SOURCE_DIR`. */
  helmSourceDir?: string;
  /** flexhelm's data folder, where the downloaded copy is kept (`helm-v0.2.1/schema.yaml`); default `resolveDataDir()`. */
  dataDir?: string;
  /** Never download: a missing copy is an error saying where to put it. */
  offline?: boolean;
  env?: NodeJS.ProcessEnv;
}

/**
 * Reads HELM v0.2.1's schema.yaml: from a HELM checkout (`helmSourceDir` / `$FLEXHELM_HELM_SOURCE_DIR`) when set,
 * else from the data folder, downloaded there once. The file must be v0.2.1's, byte for byte (SHA-256 pinned).
 */
export async function loadHelmSchema(options: LoadHelmSchemaOptions = {}): Promise<HelmSchema> {
  const env = options.env ?? process.env;
  const dir = options.helmSourceDir ?? env.FLEXHELM_HELM_SOURCE_DIR;
  let path: string;
  if (dir) {
    const candidates = [join(dir, SCHEMA_IN_CHECKOUT), join(dir, 'schema.yaml')];
    const found = candidates.find((p) => existsSync(p));
    if (!found) throw new HelmError('FileNotFoundError', `HELM's schema.yaml is not in ${dir} (looked at ${candidates.join(' and ')}); point FLEXHELM_HELM_SOURCE_DIR at a HELM v0.2.1 checkout.`);
    path = found;
  } else {
    const target = join(resolveDataDir({ dataDir: options.dataDir, env }), 'helm-v0.2.1', 'schema.yaml');
    try {
      path = await ensureFileDownloaded({ url: SCHEMA_URL, targetPath: target, sha256: HELM_SCHEMA_SHA256, offline: options.offline || undefined, env });
    } catch (err) {
      if (!(err instanceof DownloadError)) throw err;
      throw new HelmError('FileNotFoundError', `HELM's schema.yaml could not be fetched (${err.message.split('\n')[0]}); save ${SCHEMA_URL} as ${target}, or point FLEXHELM_HELM_SOURCE_DIR at a HELM v0.2.1 checkout.`, { cause: err });
    }
  }
  const bytes = readFileSync(path);
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (digest !== HELM_SCHEMA_SHA256) {
    throw new HelmError('ValueError', `${path} is not HELM v0.2.1's schema.yaml (sha256 ${digest}, expected ${HELM_SCHEMA_SHA256}); use the file from tag v0.2.1 unchanged.`);
  }
  return parseHelmSchema(bytes.toString('utf8'), path);
}

/** `MetricNameMatcher.substitute(environment)`: the mako `${var}` templates of HELM's schema; sub_split is dropped. */
export function substituteMatcher(matcher: MetricNameMatcher, environment: Record<string, string>): MetricNameMatcher {
  const render = (template: string) =>
    template.replace(/\$\{\s*([A-Za-z_]\w*)\s*\}/g, (_, name: string) => {
      const value = environment[name];
      if (value === undefined) throw new HelmError('ValueError', `schema.yaml: metric template "${template}" uses \${${name}}, which the run group's environment does not define`);
      return value;
    });
  return {
    name: render(matcher.name),
    split: render(matcher.split),
    sub_split: undefined,
    perturbation_name: matcher.perturbation_name !== undefined ? render(matcher.perturbation_name) : undefined,
  };
}
