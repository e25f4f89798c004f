import { describePolicy, type Policy } from '@flexhelm/offload/plan';
import type { CostPrediction } from './predict-cost.js';
import type { SearchResult } from './search-policy.js';

const gib = (b: number) => `${(b / 1024 ** 3).toFixed(2)} GiB`;

/** One line per candidate: the flags, predicted throughput, step times, peak RAM and disk. */
export function describeCandidate(label: string, c: { policy: Policy; prediction: CostPrediction; throughput: number }): string {
  const p = c.prediction;
  return (
    `${label}: ${describePolicy(c.policy)} — predicted ${c.throughput.toFixed(2)} tok/s ` +
    `(prefill ${(p.prefill.ms / 1000).toFixed(2)} s, decode ${p.decode.ms.toFixed(0)} ms/step for ${p.block} sequences), peak RAM ${gib(p.peakRssBytes)}` +
    `${p.diskBytes > 0 ? `, disk ${gib(p.diskBytes)}` : ''}`
  );
}

/** The lines `flexhelm run` prints before a run with an automatic policy. */
export function describeSearch(r: SearchResult): string[] {
  const lines = [describeCandidate('policy (auto)', r.best)];
  if (r.runnerUp) lines.push(describeCandidate('runner-up', r.runnerUp));
  lines.push(`searched ${r.evaluated} policies (${r.feasible} fit) in ${r.searchMs.toFixed(0)} ms`);
  return lines;
}
