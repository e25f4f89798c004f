import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Engine } from '@flexhelm/engine';
import { constructRunSpecs, parseObjectSpec } from '@flexhelm/run-spec';
import { EngineExecutor, runOne } from '@flexhelm/runner';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { loadOptTokenizer, localOptWindowService } from '@flexhelm/tokenizer';
import { OrtBackend } from '@flexhelm/ort-backend';

/** HELM v0.2.1's checkout for schema.yaml: FLEXHELM_HELM_SOURCE_DIR (CI sets it), else the one beside the clone. */
export const HELM_SOURCE = process.env.FLEXHELM_HELM_SOURCE_DIR ?? fileURLToPath(new URL('../../../../shared/helm-v0.2.1', import.meta.url));
export const HAVE_HELM_SOURCE = existsSync(join(HELM_SOURCE, 'src/helm/benchmark/static/schema.yaml'));

/** The test suite's two models (names HELM's schema knows, so display names come from it) and three scenarios. */
export const TEST_MODELS = ['together/opt-66b', 'together/opt-175b'] as const;
const TEST_SCENARIOS = ['synthetic_reasoning:mode=pattern_match', 'synthetic_reasoning_natural:difficulty=easy', 'dyck_language:num_parenthesis_pairs=2'] as const;

/**
 * Runs the 2 models × 3 scenarios suite `suite` into `outputPath` with two tiny random OPTs (3 eval instances each,
 * one trial), through flexhelm's real runner. Returns the run names.
 */
export async function makeTestSuite(outputPath: string, suite: string, modelsDir: string, scenarios: readonly string[] = TEST_SCENARIOS, evalInstances = 3, trials = 1): Promise<string[]> {
  const names: string[] = [];
  for (const [m, model] of TEST_MODELS.entries()) {
    const modelDir = join(modelsDir, `tiny-opt-${m}`);
    if (!existsSync(modelDir)) {
      mkdirSync(modelsDir, { recursive: true });
      makeTinyOptModel(modelDir, 20 + m);
    }
    const engine = await Engine.load(modelDir, { backend: new OrtBackend() });
    try {
      const tokenizer = loadOptTokenizer(modelDir);
      const executor = new EngineExecutor(engine, tokenizer, { modelId: `tiny-opt-${m}`, maxBatchSize: 8 });
      for (const scenario of scenarios) {
        for (const runSpec of constructRunSpecs(parseObjectSpec(`${scenario},model=${model}`))) {
          runSpec.adapter_spec.max_eval_instances = evalInstances;
          runSpec.adapter_spec.num_train_trials = trials;
          await runOne(runSpec, { outputPath, suite, executor, windowService: localOptWindowService(tokenizer) });
          names.push(runSpec.name);
        }
      }
    } finally {
      await engine.close();
    }
  }
  return names;
}
