import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { HelmError, objectSpec, type ArgValue } from '@flexhelm/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import type { ScenarioContext } from './scenario.js';

// A real output folder whose scenario data is present (so nothing needs the network), and a secret outside it named
// the way each scenario would name a data file. No scenario, given any argument, may read the secret.
const SECRET = 'SECRET-3f9a-do-not-leak';
let dir = '';
let context: ScenarioContext;
const logs: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'flexhelm-hostile-'));
  const out = join(dir, 'out');
  const put = async (path: string, text: string) => {
    await mkdir(join(path, '..'), { recursive: true });
    await writeFile(path, text);
  };
  for (const split of ['auxiliary_train', 'dev', 'val', 'test']) await put(join(out, 'scenarios/mmlu/data', split, `anatomy_${split}.csv`), 'Q?,a,b,c,d,A\n');
  await mkdir(join(out, 'scenarios/bbq/data'), { recursive: true });
  // Every name a traversal below could reach, holding the secret in each scenario's format.
  const csv = `${SECRET},a,b,c,d,A\n`;
  const jsonl = `${JSON.stringify({ context: SECRET, question: SECRET, ans0: SECRET, ans1: 'b', ans2: 'c', label: 0, category: 'Age', context_condition: 'ambig', question_polarity: 'neg', answer_info: {}, additional_metadata: {}, example_id: 0 })}\n`;
  for (const split of ['auxiliary_train', 'dev', 'val', 'test']) await put(join(dir, 'secret', `leak_${split}.csv`), csv);
  await put(join(dir, 'secret', 'leak'), jsonl);
  await put(join(dir, 'secret', 'leak.csv'), csv);
  context = { outputPath: join(out, 'scenarios', 'x'), dataDir: join(out, 'scenarios'), offline: true, log: (m) => logs.push(m) };
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Every form of a value that would leave a folder: relative climbs, absolute paths, NUL, backslashes, encodings. */
const hostile = (name: string): string[] => [
  `../../../../../secret/${name}`,
  `../../../../secret/${name}`,
  `../../../secret/${name}`,
  `data/../../../../secret/${name}`,
  join(dir, 'secret', name),
  `${name}\0`,
  `..\\..\\..\\..\\secret\\${name}`,
  `%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret%2f${name}`,
  'constructor',
  '__proto__',
];

// One case per scenario family that turns an argument into a file name: its class, the argument, the other arguments.
const FAMILIES: readonly (readonly [string, string, Record<string, ArgValue>])[] = [
  ['mmlu_scenario.MMLUScenario', 'subject', {}],
  ['bbq_scenario.BBQScenario', 'subject', {}],
  ['babi_qa_scenario.BabiQAScenario', 'task', {}],
  ['blimp_scenario.BLiMPScenario', 'phenomenon', {}],
  ['civil_comments_scenario.CivilCommentsScenario', 'demographic', {}],
  ['commonsense_scenario.CommonSenseScenario', 'dataset', {}],
  ['entity_data_imputation_scenario.EntityDataImputationScenario', 'dataset', {}],
  ['entity_matching_scenario.EntityMatchingScenario', 'dataset', {}],
  ['lsat_qa_scenario.LSATScenario', 'task', {}],
  ['math_scenario.MATHScenario', 'subject', { level: '1' }],
  ['natural_qa_scenario.NaturalQAScenario', 'mode', {}],
  ['raft_scenario.RAFTScenario', 'subset', {}],
  ['the_pile_scenario.ThePileScenario', 'subset', {}],
  ['truthful_qa_scenario.TruthfulQAScenario', 'task', {}],
  ['twitter_aae_scenario.TwitterAAEScenario', 'demographic', {}],
  ['wikifact_scenario.WIKIFactScenario', 'subject', {}],
  ['synthetic_efficiency_scenario.SyntheticEfficiencyScenario', 'tokenizer', { num_prompt_tokens: 1, num_instances: 1 }],
];

async function outcome(className: string, args: Record<string, ArgValue>): Promise<unknown> {
  try {
    const instances = await createScenario(objectSpec(`helm.benchmark.scenarios.${className}`, args)).getInstances(context);
    return JSON.stringify(instances);
  } catch (err) {
    return err;
  }
}

/** Resolved paths the scenario said it read or skipped: each must be inside the output folder. */
function pathsOutside(): string[] {
  const root = resolve(dir, 'out');
  return logs
    .flatMap((m) => [...m.matchAll(/(\/[^\s,:]+)/g)].map((match) => resolve(match[1]!)))
    .filter((p) => p.startsWith(resolve(dir)) && relative(root, p).startsWith(`..${sep}`));
}

describe('a scenario called with a hostile argument over a real data folder', () => {
  it.each(FAMILIES)('%s (%s) refuses with a HelmError and never reads the secret', async (className, argument, others) => {
    for (const value of hostile('leak')) {
      logs.length = 0;
      const result = await outcome(className, { ...others, [argument]: value });
      const what = `${argument}=${JSON.stringify(value)}: ${String(result)}`;
      // Refused with a typed error, or (a name that stays inside, such as a percent-encoded one) a file that is not there.
      if (typeof result === 'string') expect(result, what).not.toContain(SECRET);
      else {
        expect(result instanceof HelmError || (result as Error).name === 'DownloadError', what).toBe(true);
        expect((result as Error).message, what).not.toContain(SECRET);
      }
      expect(pathsOutside(), `${argument}=${JSON.stringify(value)}`).toEqual([]);
    }
  });

  it('mmlu: the issue case is a ValueError naming the file, before anything outside is touched', async () => {
    const error = (await outcome('mmlu_scenario.MMLUScenario', { subject: '../../../../../secret/leak' })) as HelmError;
    expect(error.pythonClass).toBe('ValueError');
    expect(error.message).toBe(
      `the scenario file "auxiliary_train/../../../../../secret/leak_auxiliary_train.csv" leads outside the scenario's data folder; scenario arguments that name files must be plain names (see the run spec's allowed values)`,
    );
  });

  it('bbq: a category that climbs out is refused before the download helper looks for the file', async () => {
    const error = (await outcome('bbq_scenario.BBQScenario', { subject: '../../../../secret/leak' })) as HelmError;
    expect([error.pythonClass, error.message]).toEqual([
      'ValueError',
      `the scenario file "../../../secret/leak" leads outside the scenario's data folder; scenario arguments that name files must be plain names (see the run spec's allowed values)`,
    ]);
  });

  it('mmlu: a data file that is a link leading out of the folder is refused before it is read', async () => {
    const testDir = join(dir, 'out/scenarios/mmlu/data/test');
    await symlink(join(dir, 'secret', 'leak_test.csv'), join(testDir, 'linked_test.csv'));
    try {
      const error = (await outcome('mmlu_scenario.MMLUScenario', { subject: 'linked' })) as HelmError;
      expect(error.message).toMatch(/"test\/linked_test.csv" is a link that leads outside the scenario's data folder/);
    } finally {
      await rm(join(testDir, 'linked_test.csv'));
    }
    expect(await readdir(testDir)).toEqual(['anatomy_test.csv']);
  });

  it('mmlu: a plain subject still reads its files', async () => {
    expect(await outcome('mmlu_scenario.MMLUScenario', { subject: 'anatomy' })).toContain('"Q?"');
  });
});
