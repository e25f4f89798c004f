import { pyCapitalize, pyHtmlUnescape, pyJsonDumps, PythonRandom } from '@flexhelm/python-compat';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { writeFileAtomicAsync } from '@flexhelm/atomic-write';
import { join } from 'node:path';
import { createGunzip } from 'node:zlib';
import { CORRECT_TAG, HelmError, TRAIN_SPLIT, VALID_SPLIT, instance, passageQuestionInput, reference, type Input, type Instance } from '@flexhelm/core';
import { z } from 'zod';
import { downloadSource } from './download-source.js';
import { jsonField, jsonString, readJsonLines } from './json-lines.js';
import type { Scenario, ScenarioContext } from './scenario.js';
import { defineScenario, stringArg } from './scenario-definition.js';

export const NATURAL_QA_BASE_URL = 'https://storage.googleapis.com/natural_questions/v1.0/dev';
export const NATURAL_QA_FILES = [0, 1, 2, 3, 4].map((i) => `nq-dev-0${i}.jsonl.gz`);
const MODES = ['openbook_wiki', 'openbook_longans', 'closedbook'];

/** HELM's `RawInstance`: what is kept of one Natural Questions example (cached next to the data file). */
export interface NaturalQaRawInstance {
  title: string;
  document: string;
  question: string;
  long_answers: string[];
  short_answers: string[];
}

const rawInstanceSchema = z.object({
  title: z.string(),
  document: z.string(),
  question: z.string(),
  long_answers: z.array(z.string()),
  short_answers: z.array(z.string()),
});

/**
 * HELM's `NaturalQAScenario`: the Natural Questions dev set (5 gzipped files) restricted to examples with a short
 * answer; within each file even positions are train, odd ones valid. `random.seed(0)` picks one short answer per
 * example (the train reference, and for `openbook_longans` the passage). Parsed examples are cached in
 * `<file>-instances.jsonl`, as HELM does.
 */
export class NaturalQAScenario implements Scenario {
  static readonly className = 'helm.benchmark.scenarios.natural_qa_scenario.NaturalQAScenario';
  readonly className = NaturalQAScenario.className;
  readonly name = 'natural_qa';
  readonly description = 'Question answering from wikipedia.';
  readonly tags = ['question_answering'];

  constructor(readonly mode: string) {
    if (!MODES.includes(mode)) throw new HelmError('AssertionError', `Unknown natural_qa mode "${mode}"; use ${MODES.join(', ')}.`);
  }

  async getInstances(context: ScenarioContext): Promise<Instance[]> {
    const random = new PythonRandom(0);
    const instances: Instance[] = [];
    for (const file of NATURAL_QA_FILES) {
      const path = await downloadSource(context, this.name, { url: `${NATURAL_QA_BASE_URL}/${file}`, path: join('data', file) });
      const raw = await rawInstances(path, context);
      raw.forEach((r, i) => { instances.push(this.instanceFor(r, i % 2 === 0 ? 'train' : 'val', random)); });
    }
    return instances;
  }

  /** HELM's `create_instance`. */
  instanceFor(raw: NaturalQaRawInstance, split: 'train' | 'val', random: PythonRandom): Instance {
    let question = pyCapitalize(raw.question);
    if (question === '') throw new HelmError('Exception', 'IndexError: a Natural Questions question is empty.');
    if (!question.endsWith('?')) question += '?';
    const answerIndex = random.randint(0, raw.short_answers.length - 1);
    let input: Input;
    if (this.mode === 'closedbook') input = { text: question };
    else if (this.mode === 'openbook_wiki') input = passageQuestionInput(raw.document, question, { passagePrefix: `Title: ${raw.title}\n\nPassage: `, separator: '\n\n' });
    else {
      const passage = raw.long_answers[answerIndex];
      if (passage === undefined) {
        throw new HelmError('IndexError', `list index out of range: an example has ${raw.short_answers.length} short answers but only ${raw.long_answers.length} long answers (the long answer of short answer ${answerIndex} is missing).`);
      }
      input = passageQuestionInput(passage, question, { passagePrefix: 'Passage: ', separator: '\n\n' });
    }
    const answers = split === 'train' ? raw.short_answers.slice(answerIndex, answerIndex + 1) : [...new Set(raw.short_answers)];
    return instance({ input, references: answers.map((a) => reference(a, [CORRECT_TAG])), split: split === 'train' ? TRAIN_SPLIT : VALID_SPLIT });
  }
}

/** The raw instances of one data file: from its `-instances.jsonl` cache, or parsed and then cached (atomically). */
async function rawInstances(path: string, context: ScenarioContext): Promise<NaturalQaRawInstance[]> {
  const cachePath = `${path}-instances.jsonl`;
  if (await exists(cachePath)) {
    context.log?.(`Reading ${cachePath}`);
    return (await readJsonLines(cachePath)).map((row, i) => {
      const parsed = rawInstanceSchema.safeParse(row);
      if (!parsed.success) throw new HelmError('TypeError', `line ${i + 1} of ${cachePath} is not a Natural Questions raw instance; delete the file to rebuild it.`);
      return parsed.data;
    });
  }
  context.log?.(`Reading ${path}`);
  const raw: NaturalQaRawInstance[] = [];
  let lineNumber = 0;
  for await (const line of gzipLines(path)) {
    lineNumber++;
    let sample: unknown;
    try {
      sample = JSON.parse(line);
    } catch (error) {
      throw new HelmError('ValueError', `line ${lineNumber} of ${path} is not JSON (${(error as Error).message}); delete the file to download it again.`);
    }
    const annotations = jsonField(sample, 'annotations', `line ${lineNumber} of ${path}`);
    if (!Array.isArray(annotations)) throw new HelmError('TypeError', `line ${lineNumber} of ${path}: "annotations" should be a list.`);
    if (annotations.some((a) => (jsonField(a, 'short_answers', path) as unknown[]).length > 0)) raw.push(naturalQaRawInstance(sample, `line ${lineNumber} of ${path}`));
  }
  context.log?.(`${raw.length} instances`);
  await writeFileAtomicAsync(cachePath, raw.map((r) => `${pyJsonDumps(r as unknown as Parameters<typeof pyJsonDumps>[0])}\n`).join(''));
  return raw;
}

/** The lines of a gzip file, split on `\n` as bytes and decoded as UTF-8 (Python's `for line in gzip.open(path)`). */
async function* gzipLines(path: string): AsyncGenerator<string> {
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let pending: Buffer[] = [];
  for await (const chunk of createReadStream(path).pipe(createGunzip()) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl >= 0; nl = chunk.indexOf(0x0a, start)) {
      pending.push(chunk.subarray(start, nl + 1));
      yield decoder.decode(Buffer.concat(pending));
      pending = [];
      start = nl + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  }
  if (pending.length) yield decoder.decode(Buffer.concat(pending));
}

/** HELM's `_clean_text`: non-breaking spaces to spaces, HTML entities decoded, tags removed. */
export function naturalQaCleanText(raw: Uint8Array): string {
  const bytes = Buffer.from(raw);
  const parts: Buffer[] = [];
  let start = 0;
  for (let i = bytes.indexOf('\xc2\xa0', 0, 'latin1'); i >= 0; i = bytes.indexOf('\xc2\xa0', start, 'latin1')) {
    parts.push(bytes.subarray(start, i), Buffer.from(' '));
    start = i + 2;
  }
  parts.push(bytes.subarray(start));
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(parts));
  } catch {
    throw new HelmError('Exception', 'UnicodeDecodeError: a Natural Questions answer span cuts a UTF-8 character.');
  }
  return pyHtmlUnescape(text).replace(/<([^>]*)>/g, '');
}

/** HELM's `_clean_token`: spaces to underscores, HTML entities decoded, tags removed. */
export function naturalQaCleanToken(token: string): string {
  return pyHtmlUnescape(token.replaceAll(' ', '_')).replace(/<([^>]*)>/g, '');
}

/** Python's `bytes[start:end]` (negative indexes count from the end). */
function pySlice(bytes: Uint8Array, start: number, end: number): Uint8Array {
  const clamp = (i: number) => Math.min(Math.max(i < 0 ? bytes.length + i : i, 0), bytes.length);
  const s = clamp(start);
  return bytes.subarray(s, Math.max(clamp(end), s));
}

function int(value: unknown, where: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) throw new HelmError('TypeError', `${where}: byte offsets should be ints.`);
  return value;
}

/** HELM's `create_raw_instance` for one Natural Questions example. */
export function naturalQaRawInstance(sample: unknown, where: string): NaturalQaRawInstance {
  const tokens = jsonField(sample, 'document_tokens', where);
  if (!Array.isArray(tokens)) throw new HelmError('TypeError', `${where}: "document_tokens" should be a list.`);
  const document = tokens.map((t) => naturalQaCleanToken(jsonString(t, 'token', where))).join(' ');
  const html = Buffer.from(jsonString(sample, 'document_html', where), 'utf8');
  const shortAnswers: string[] = [];
  const longAnswers: string[] = [];
  for (const annotation of jsonField(sample, 'annotations', where) as unknown[]) {
    const long = jsonField(annotation, 'long_answer', where);
    const longText = naturalQaCleanText(pySlice(html, int(jsonField(long, 'start_byte', where), where), int(jsonField(long, 'end_byte', where), where)));
    for (const short of jsonField(annotation, 'short_answers', where) as unknown[]) {
      shortAnswers.push(naturalQaCleanText(pySlice(html, int(jsonField(short, 'start_byte', where), where), int(jsonField(short, 'end_byte', where), where))));
      longAnswers.push(longText);
    }
  }
  return {
    title: jsonString(sample, 'document_title', where),
    document,
    question: jsonString(sample, 'question_text', where),
    long_answers: longAnswers,
    short_answers: shortAnswers,
  };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export const naturalQaDefinition = defineScenario(NaturalQAScenario.className, { mode: stringArg() }, (args) => new NaturalQAScenario(args.mode));
