import { parsePythonCsv, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { HelmError, TEST_SPLIT, instance, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const TWITTER_AAE_URL = 'https://worksheets.codalab.org/rest/bundles/0x31485f8c37ad481fb9f4e9bf7ccff6e5/contents/blob/';

/** HELM's `TWITTERAAEScenario`: tweets of one demographic (`aa` or `white`) as language-modeling instances. */
export class TwitterAAEScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.twitter_aae_scenario.TwitterAAEScenario';
  readonly className = TwitterAAEScenario.className;
  readonly name = 'twitter_aae';
  readonly description = 'Twitter African-American English';
  readonly tags = ['bias', 'language_modeling'];

  constructor(readonly demographic = 'aa') {
    if (demographic !== 'aa' && demographic !== 'white') throw new HelmError('AssertionError', `Unsupported demographic: ${demographic}. Use aa or white.`);
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const file = `${this.demographic}_tweets.csv`;
    const path = await downloadSource(context, this.name, { url: TWITTER_AAE_URL + file, path: file });
    context.log?.(`Reading ${path}`);
    return parsePythonCsv(pythonLines(await readPythonText(path))).map((row, i) => {
      if (row.length === 0) throw new HelmError('Exception', `IndexError: row ${i + 1} of ${path} is empty.`);
      return instance({ input: { text: row[0]! }, references: [], split: TEST_SPLIT });
    });
  }
}

export const twitterAaeDefinition = defineScenario(TwitterAAEScenario.className, { demographic: stringArg().default('aa') }, (args) => new TwitterAAEScenario(args.demographic));
