import { PythonRandom } from '@flexhelm/python-compat';
import { type Instance, firstCorrectReference } from '@flexhelm/core';

/** Python's default string order: by code point (JavaScript's `<` compares UTF-16 units, which differs above U+FFFF). */
export function compareCodePoints(a: string, b: string): number {
  const ia = a[Symbol.iterator]();
  const ib = b[Symbol.iterator]();
  for (;;) {
    const x = ia.next();
    const y = ib.next();
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1;
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!;
    if (d !== 0) return d;
  }
}

/**
 * HELM 0.2.1's `InContextLearningAdapter.sample_examples`, draw for draw with Python's global `random` seeded with
 * `seed`: labels (first correct reference texts) ordered by how many train instances carry them (ties shuffled), one
 * instance per label in turn, then the rest from the unlabeled instances.
 *
 * Where HELM would loop forever (labeled instances used up while unlabeled ones remain), this stops taking labeled
 * instances and samples the rest from the unlabeled ones; every terminating case gives HELM's result.
 */
export function sampleExamples(allTrainInstances: readonly Instance[], maxTrainInstances: number, seed: number): Instance[] {
  const random = new PythonRandom(seed);
  let remaining = Math.min(allTrainInstances.length, maxTrainInstances);
  const unlabeled: Instance[] = [];
  const byLabel = new Map<string, Instance[]>();
  for (const inst of allTrainInstances) {
    const correct = firstCorrectReference(inst);
    if (correct) {
      const label = correct.output.text;
      if (!byLabel.has(label)) byLabel.set(label, []);
      byLabel.get(label)!.push(inst);
    } else unlabeled.push(inst);
  }
  const countsToLabels = new Map<number, string[]>();
  for (const label of [...byLabel.keys()].sort(compareCodePoints)) {
    const count = byLabel.get(label)!.length;
    if (!countsToLabels.has(count)) countsToLabels.set(count, []);
    countsToLabels.get(count)!.push(label);
  }
  const sortedLabels: string[] = [];
  for (const count of [...countsToLabels.keys()].sort((a, b) => b - a)) {
    const labels = countsToLabels.get(count)!;
    random.shuffle(labels);
    sortedLabels.push(...labels);
  }
  const examples: Instance[] = [];
  let labeledLeft = [...byLabel.values()].reduce((n, list) => n + list.length, 0);
  for (let i = 0; remaining > 0; i++) {
    const nextLabel = sortedLabels.length > 0 ? sortedLabels[i % sortedLabels.length] : undefined;
    if (!nextLabel) break;
    if (labeledLeft === 0) break; // HELM 0.2.1 cycles forever here.
    const pool = byLabel.get(nextLabel)!;
    if (pool.length === 0) continue;
    examples.push(pool.splice(random.randrange(pool.length), 1)[0]!);
    labeledLeft--;
    remaining--;
  }
  return [...examples, ...random.sample(unlabeled, remaining)];
}
