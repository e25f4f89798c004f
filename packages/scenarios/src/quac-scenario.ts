import { PythonRandom } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonFile } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

export const QUAC_BASE_URL = 'https://s3.amazonaws.com/my89public/quac';
const CANNOT_ANSWER = ' CANNOTANSWER';

/**
 * HELM's `QuACScenario`: question answering in a dialogue. For each sample, `random.randint` (after `random.seed(0)`)
 * picks the question to ask; the prompt holds title, background, section, passage and the earlier turns (HELM skips
 * the turn just before the question). Unique gold answers are the references, padded with three paraphrases when
 * the only one is `CANNOTANSWER`.
 */
export class QuACScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.quac_scenario.QuACScenario';
  readonly className = QuACScenario.className;
  readonly name = 'quac';
  readonly description = 'Question answering from dialog prompts.';
  readonly tags = ['question_answering'];

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const random = new PythonRandom(0);
    const instances: Instance[] = [];
    for (const [file, split] of [
      ['train', TRAIN_SPLIT],
      ['val', VALID_SPLIT],
    ]) {
      const path = await downloadSource(context, this.name, { url: `${QUAC_BASE_URL}/${file}_v0.2.json`, path: join('data', `${file}.json`) });
      const samples = jsonField(await readJsonFile(path), 'data', path);
      if (!Array.isArray(samples)) throw new HelmError('TypeError', `${path}: "data" should be a list.`);
      samples.forEach((sample, i) => {
        const [prompt, answers] = quacPrompt(sample, random, `sample ${i + 1} of ${path}`);
        instances.push(instance({ input: { text: prompt }, references: answers.map((a) => reference(a, [CORRECT_TAG])), split }));
      });
    }
    return instances;
  }
}

/** HELM's `create_prompt`: the prompt text and the unique answers of the chosen question. */
export function quacPrompt(sample: unknown, random: PythonRandom, where = 'a QuAC sample'): [string, string[]] {
  let prompt = `Title: ${jsonString(sample, 'title', where)}\n\n`;
  prompt += `Background: ${jsonString(sample, 'background', where)}\n\n`;
  prompt += `Section: ${jsonString(sample, 'section_title', where)}\n`;
  const paragraphs = jsonField(sample, 'paragraphs', where);
  if (!Array.isArray(paragraphs) || paragraphs.length === 0) throw new HelmError('Exception', `IndexError: ${where} has no paragraphs.`);
  const dialogue = paragraphs[0];
  const passage = jsonString(dialogue, 'context', where);
  if (!passage.endsWith(CANNOT_ANSWER)) throw new HelmError('AssertionError', `${where}: the context should end with "${CANNOT_ANSWER}".`);
  prompt += `Passage: ${passage.slice(0, -CANNOT_ANSWER.length)}\n\n`;
  const qas = jsonField(dialogue, 'qas', where);
  if (!Array.isArray(qas)) throw new HelmError('TypeError', `${where}: "qas" should be a list.`);
  const k = random.randint(3, qas.length) - 1;
  for (let i = 0; i < k - 1; i++) {
    prompt += `Question: ${jsonString(qas[i], 'question', where)}\n`;
    prompt += `Answer: ${jsonString(jsonField(qas[i], 'orig_answer', where), 'text', where)}\n\n`;
  }
  prompt += `Question: ${jsonString(qas[k], 'question', where)}`;
  const gold = jsonField(qas[k], 'answers', where);
  if (!Array.isArray(gold)) throw new HelmError('TypeError', `${where}: "answers" should be a list.`);
  const answers = [...new Set(gold.map((a) => jsonString(a, 'text', where)))];
  if (answers.length === 1 && answers[0] === 'CANNOTANSWER') answers.push('Not enough information', 'Cannot answer', 'Do not know');
  return [prompt, answers];
}

export const quacDefinition = defineScenario(QuACScenario.className, {}, () => new QuACScenario());
