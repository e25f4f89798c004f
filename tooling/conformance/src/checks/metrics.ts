import { pyJsonDumps, pyJsonParse, type PyJsonValue, type PyNumber, toNumber, toPlain } from '@flexhelm/python-compat';
import { readFile } from 'node:fs/promises';
import { adapterSpec, helmJson, instance, metricName, reference, request, requestResult, requestState, type MetricName, type Stat } from '@flexhelm/core';
import {
  addToStat,
  BasicMetric,
  bleu1,
  bleu4,
  mathEquiv,
  mergeStat,
  newStat,
  normalizeText,
  REFERENCE_METRIC_FUNCTIONS,
  sentTokenize,
  StatTable,
  statBareStr,
  statRepr,
  takeMean,
  wordTokenize,
  type StatValue,
} from '@flexhelm/metrics';
import { CaseRecorder, describeDifference, type CheckResult } from '../check-result.js';

type GoldenMap = ReadonlyMap<string, PyJsonValue>;

function sameNumber(expected: PyJsonValue, actual: PyNumber): string | undefined {
  const e = toNumber(expected as PyNumber);
  const a = toNumber(actual);
  return e === a || (Number.isNaN(e) && Number.isNaN(a)) ? undefined : `expected ${String(e)}, got ${String(a)}`;
}

function sameJson(expected: PyJsonValue, actual: unknown): string | undefined {
  return describeDifference(pyJsonDumps(expected, 2), helmJson(actual));
}

function statValue(v: PyJsonValue): StatValue {
  if (v === null || typeof v === 'boolean' || typeof v === 'number') return v;
  return v as PyNumber;
}

function nameOf(golden: GoldenMap): MetricName {
  const plain = toPlain(golden as PyJsonValue) as MetricName;
  return metricName(plain.name, { split: plain.split, sub_split: plain.sub_split, perturbation: plain.perturbation });
}

function statFromValues(name: MetricName, values: PyJsonValue[]): Stat {
  const stat = newStat(name);
  for (const v of values) addToStat(stat, statValue(v));
  return stat;
}

function parseList(text: string): PyJsonValue[] {
  return pyJsonParse(`[${text}]`) as PyJsonValue[];
}

/** Re-runs one `stats_extra` operation from the description in its key (e.g. `merge_[1,2]_with_[10]`). */
function statsExtraActual(key: string, expected: PyJsonValue): unknown {
  const goldenName = (s: PyJsonValue) => nameOf((s as GoldenMap).get('name') as GoldenMap);
  const m = /^merge_(?:\[(.*)\]|empty)_with_(?:\[(.*)\]|empty)$/.exec(key);
  if (m) {
    const name = goldenName(expected);
    const left = m[1] === undefined ? [] : parseList(m[1]);
    const right = m[2] === undefined ? [] : parseList(m[2]);
    return mergeStat(statFromValues(name, left), statFromValues(name, right));
  }
  const mean = /^take_mean_of_(?:\[(.*)\]|empty)$/.exec(key);
  if (mean) {
    return takeMean(statFromValues(goldenName(expected), mean[1] === undefined ? [] : parseList(mean[1])));
  }
  if (key === 'merge_stat_dict') {
    // The inputs were single-value stats merged in order; a stat of one or two values is recoverable from min/max.
    const table = new StatTable();
    for (const s of expected as GoldenMap[]) {
      const count = s.get('count') as number;
      if (count > 2) throw new Error('cannot reconstruct the inputs of a merged stat with more than two values');
      const values = count === 0 ? [] : count === 1 ? [s.get('min')!] : [s.get('min')!, s.get('max')!];
      for (const v of values) table.merge(statFromValues(nameOf(s.get('name') as GoldenMap), [v]));
    }
    return table.values();
  }
  throw new Error(`unknown stats_extra operation "${key}"`);
}

/** Checks `helm/metrics.json`: normalize_text, every score on every pair, BLEU with its tokenization, Stat arithmetic and the reference-metric driver. */
export async function check(path: string): Promise<CheckResult> {
  const golden = pyJsonParse(await readFile(path, 'utf8')) as GoldenMap;
  const recorder = new CaseRecorder();

  for (const [i, c] of (golden.get('normalize_text') as GoldenMap[]).entries()) {
    const text = c.get('text') as string;
    await recorder.check(`normalize_text #${i} ${JSON.stringify(text)}`, () => describeDifference(c.get('normalize_text') as string, normalizeText(text)));
  }

  for (const [i, c] of (golden.get('pairs') as GoldenMap[]).entries()) {
    const gold = c.get('gold') as string;
    const pred = c.get('pred') as string;
    for (const [metric, expected] of c.get('values') as GoldenMap) {
      await recorder.check(`pairs #${i} (${String(c.get('note'))}) ${metric}`, () => {
        const fn = metric === 'math_equiv' ? (g: string, p: string) => mathEquiv(g, p) : REFERENCE_METRIC_FUNCTIONS[metric];
        if (!fn) return `no score function "${metric}"`;
        return sameNumber(expected, fn(gold, pred));
      });
    }
  }

  for (const [i, c] of (golden.get('bleu') as GoldenMap[]).entries()) {
    const gold = c.get('gold') as string;
    const pred = c.get('pred') as string;
    const label = `bleu #${i} (${String(c.get('note'))})`;
    if (c.has('punkt_single_sentence')) {
      await recorder.check(`${label} punkt_single_sentence`, () => {
        const single = [gold, pred].every((t) => sentTokenize(t).length <= 1);
        return single === c.get('punkt_single_sentence') ? undefined : `single sentence: expected ${String(c.get('punkt_single_sentence'))}, got ${single}`;
      });
    }
    for (const [key, text] of [['word_tokenize_gold', gold], ['word_tokenize_pred', pred]] as const) {
      if (c.has(key)) await recorder.check(`${label} ${key}`, () => describeDifference(JSON.stringify(toPlain(c.get(key)!)), JSON.stringify(wordTokenize(text))));
    }
    for (const [metric, expected] of c.get('values') as GoldenMap) {
      await recorder.check(`${label} ${metric}`, () => {
        const fn = metric === 'bleu_1' ? bleu1 : metric === 'bleu_4' ? bleu4 : undefined;
        if (!fn) return `no BLEU function "${metric}"`;
        return sameNumber(expected, fn(gold, pred));
      });
    }
  }

  for (const c of golden.get('stats') as GoldenMap[]) {
    const label = `stats ${String(c.get('name'))}`;
    const expectedStat = c.get('stat') as GoldenMap;
    const build = () => statFromValues(nameOf(expectedStat.get('name') as GoldenMap), c.get('values') as PyJsonValue[]);
    await recorder.check(`${label} stat`, () => sameJson(expectedStat, build()));
    if (c.has('bare_str')) await recorder.check(`${label} bare_str`, () => describeDifference(c.get('bare_str') as string, statBareStr(build())));
    if (c.has('repr')) await recorder.check(`${label} repr`, () => describeDifference(c.get('repr') as string, statRepr(build())));
  }

  for (const [key, expected] of golden.get('stats_extra') as GoldenMap) {
    await recorder.check(`stats_extra ${key}`, () => sameJson(expected, statsExtraActual(key, expected)));
  }

  for (const [i, c] of (golden.get('compute_reference_metrics') as GoldenMap[]).entries()) {
    await recorder.check(`compute_reference_metrics #${i} (${String(c.get('note'))})`, () => {
      const refs = (c.get('references') as GoldenMap[]).map((r) => reference(r.get('text') as string, r.get('correct') ? ['correct'] : []));
      const completions = (c.get('completions') as GoldenMap[]).map((s) => ({ text: s.get('text') as string, logprob: toNumber(s.get('logprob') as PyNumber), tokens: [] }));
      const mapping = c.get('output_mapping');
      const spec = adapterSpec({ num_outputs: c.get('adapter_num_outputs') as number });
      const rs = requestState({
        instance: instance({ input: { text: '' }, references: refs, split: 'test', id: 'id0' }),
        train_trial_index: 0,
        output_mapping: mapping ? (toPlain(mapping) as Record<string, string>) : undefined,
        request: request(),
        result: requestResult({ success: true, completions }),
        num_train_instances: 0,
        prompt_truncated: false,
      });
      const metric = new BasicMetric(toPlain(c.get('metric_names')!) as string[]);
      return sameJson(c.get('stats')!, metric.computeReferenceMetrics(spec, rs));
    });
  }

  return recorder.result();
}
