import { optConfigByName } from '@flexhelm/engine';
import { parsePolicy, planMemory } from '@flexhelm/offload';
import { modelShapeOf, peakRssTerms } from '@flexhelm/policy-search';
const [model, L, S, gen, ...ps] = process.argv.slice(2);
const shape = { ...modelShapeOf(optConfigByName(model)), numLayers: +L };
for (const p of ps) {
  const [wg, wc, g, n, q] = p.split(',').map(Number);
  const pol = parsePolicy({ gpuBatchSize: g, numGpuBatches: n, wGpuPercent: wg, wCpuPercent: wc, cacheGpuPercent: 100, cacheCpuPercent: 0, actGpuPercent: 100, actCpuPercent: 0, compressWeight: !!q });
  const wl = { promptLen: +S, genLen: +gen };
  const plan = planMemory(shape, pol, wl);
  const t = peakRssTerms(shape, pol, plan, 103 * 2 ** 20, wl);
  console.log(p, Object.entries(t).map(([k, x]) => `${k}:${(x / 2 ** 20).toFixed(0)}`).join(' '), 'ws parts: act', ((plan.activations.compute) / 2 ** 20).toFixed(0), 'plan.ws', (plan.workspace / 2 ** 20).toFixed(0));
}
