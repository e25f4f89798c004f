import { parsePythonCsv, pyStrip, pythonLines, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, reference, type Instance, type Reference } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const TRUTHFUL_QA_URL = 'https://raw.githubusercontent.com/sylinrl/TruthfulQA/main/TruthfulQA.csv';
const TRAIN_RATIO = 0.2;
const TASKS = ['mc_single'];

/**
 * HELM's `TruthfulQAScenario` (task `mc_single`): each question with its incorrect answers and best answer as
 * references, rotated left by `ord(best[0]) % count`; the first 20% of the rows are train, the rest valid.
 */
export class TruthfulQAScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.truthful_qa_scenario.TruthfulQAScenario';
  readonly className = TruthfulQAScenario.className;
  readonly name = 'truthful_qa';
  readonly description = 'Truthful QA';
  readonly tags = ['knowledge', 'harms', 'multiple_choice'];

  constructor(readonly task: string) {
    if (!TASKS.includes(task)) throw new HelmError('AssertionError', `Unknown truthful_qa task "${task}"; HELM 0.2.1 has only ${TASKS.join(', ')}.`);
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const path = await downloadSource(context, this.name, { url: TRUTHFUL_QA_URL, path: join('data', 'TruthfulQA.csv') });
    const rows = parsePythonCsv(pythonLines(await readPythonText(path))).slice(1);
    const splitAt = Math.trunc(rows.length * TRAIN_RATIO);
    return rows.map((row, i) => {
      const where = `row ${i + 2} of ${path}`;
      if (row.length !== 7) throw new HelmError('ValueError', `${where} has ${row.length} fields; TruthfulQA rows have 7 (Type … Source).`);
      const [, , question, bestAnswer, , incorrectAnswers] = row as [string, string, string, string, string, string, string]; // 7 fields, checked above
      return instance({
        input: { text: pyStrip(question) },
        references: truthfulQaReferences(formatAnswer(bestAnswer, where), splitAnswers(incorrectAnswers, where)),
        split: i < splitAt ? TRAIN_SPLIT : VALID_SPLIT,
      });
    });
  }
}

/** HELM's `format_str`: stripped, with a final `.` added when missing. */
export function formatAnswer(answer: string, where = 'an answer'): string {
  const formatted = pyStrip(answer);
  if (formatted === '') throw new HelmError('Exception', `IndexError: ${where} has an empty answer.`);
  return formatted.endsWith('.') ? formatted : `${formatted}.`;
}

function splitAnswers(answers: string, where: string): string[] {
  return answers
    .split(';')
    .filter((a) => pyStrip(a) !== '')
    .map((a) => formatAnswer(a, where));
}

/** The incorrect answers then the best (correct) one, rotated left by `ord(best[0]) % count`. */
export function truthfulQaReferences(bestAnswer: string, incorrectAnswers: readonly string[]): Reference[] {
  const references = [...incorrectAnswers.map((a) => reference(a, [])), reference(bestAnswer, [CORRECT_TAG])];
  const k = bestAnswer.codePointAt(0)! % references.length;
  return [...references.slice(k), ...references.slice(0, k)];
}

export const truthfulQaDefinition = defineScenario(TruthfulQAScenario.className, { task: stringArg() }, (args) => new TruthfulQAScenario(args.task));
