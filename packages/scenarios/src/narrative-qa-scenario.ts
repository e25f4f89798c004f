import { parsePythonCsvDicts, pyStrip, pythonLines, PythonRandom, readPythonText } from '@flexhelm/python-compat';
import { join } from 'node:path';
import { ALL_SPLITS, CORRECT_TAG, HelmError, instance, passageQuestionInput, reference, type Input, type Instance } from '@flexhelm/core';
import { downloadSource } from './download-source.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario } from './scenario-definition.js';

export const NARRATIVE_QA_URL = 'https://github.com/deepmind/narrativeqa/archive/master.zip';

type CsvRecord = Map<string, string | undefined | string[]>;

/**
 * HELM's `NarrativeQAScenario`: for every document of every split (train, valid, test), one question drawn with
 * Python's `random.choice` after `random.seed(0)`, asked about the document's Wikipedia summary; both reference
 * answers are correct.
 */
export class NarrativeQAScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.narrativeqa_scenario.NarrativeQAScenario';
  readonly className = NarrativeQAScenario.className;
  readonly name = 'narrativeqa';
  readonly description = 'Question answering using summaries of books/movie scripts.';
  readonly tags = ['question_answering'];

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const repo = await downloadSource(context, this.name, { url: NARRATIVE_QA_URL, path: join('data', 'narrativeqa-master'), unpack: 'zip' });
    const summariesFile = join(repo, 'third_party', 'wikipedia', 'summaries.csv');
    const qapsFile = join(repo, 'qaps.csv');
    const summaries = parsePythonCsvDicts(pythonLines(await readPythonText(summariesFile)));
    const qaps = parsePythonCsvDicts(pythonLines(await readPythonText(qapsFile)));
    const random = new PythonRandom(0);
    return ALL_SPLITS.flatMap((split) => narrativeQaSplit(summaries, qaps, split, random, summariesFile, qapsFile));
  }
}

function text(row: CsvRecord, key: string, where: string): string {
  if (!row.has(key)) throw new HelmError('KeyError', `'${key}': ${where} has no "${key}" column.`);
  const value = row.get(key);
  if (typeof value !== 'string') throw new HelmError('Exception', `AttributeError: ${where} has no value in column "${key}".`);
  return value;
}

/** HELM's `get_split_instances`: one random question per document, in order of the documents' first question. */
export function narrativeQaSplit(summaries: CsvRecord[], qaps: CsvRecord[], split: string, random: PythonRandom, summariesFile = 'summaries.csv', qapsFile = 'qaps.csv'): Instance[] {
  const splitSummaries = new Map<string, CsvRecord>();
  for (const row of summaries) if (text(row, 'set', summariesFile) === split) splitSummaries.set(text(row, 'document_id', summariesFile), row);
  const questions = new Map<string, CsvRecord[]>();
  for (const row of qaps) {
    if (text(row, 'set', qapsFile) !== split) continue;
    const id = text(row, 'document_id', qapsFile);
    const list = questions.get(id);
    if (list) list.push(row);
    else questions.set(id, [row]);
  }
  const instances: Instance[] = [];
  for (const [documentId, rows] of questions) {
    const row = random.choice(rows);
    const summaryRow = splitSummaries.get(documentId);
    if (!summaryRow) throw new HelmError('KeyError', `'${documentId}': ${summariesFile} has no ${split} summary for a document that ${qapsFile} asks about.`);
    instances.push(
      instance({
        input: narrativeQaInput(pyStrip(text(summaryRow, 'summary', summariesFile)), pyStrip(text(row, 'question', qapsFile))),
        references: [reference(text(row, 'answer1', qapsFile), [CORRECT_TAG]), reference(text(row, 'answer2', qapsFile), [CORRECT_TAG])],
        split,
      }),
    );
  }
  return instances;
}

/** HELM's `get_context`: the question gets a `?` when it has none. */
export function narrativeQaInput(summary: string, question: string): Input {
  if (question === '') throw new HelmError('Exception', 'IndexError: a NarrativeQA question is empty.');
  return passageQuestionInput(summary, question.endsWith('?') ? question : `${question}?`);
}

export const narrativeQaDefinition = defineScenario(NarrativeQAScenario.className, {}, () => new NarrativeQAScenario());
