// Test helper (not built): a real suite of two tiny random OPT models × three HELM scenarios, run end to end by the
// runner as `flexhelm run` does, then summarized as `helm-summarize` does.
import { join } from 'node:path';
import { Engine } from '@flexhelm/engine';
import { constructRunSpecs, parseObjectSpec, registerLocalModel } from '@flexhelm/run-spec';
import { EngineExecutor, runOne } from '@flexhelm/runner';
import { makeTinyOptModel } from '@flexhelm/runner/testing';
import { loadTokenizerFolder, localOptWindowService } from '@flexhelm/tokenizer';
import { OrtBackend } from '@flexhelm/ort-backend';

export const SUITE = 'v1';
export const MODELS = ['local/tiny-a', 'local/tiny-b'] as const;
const DESCRIPTIONS = ['synthetic_reasoning:mode=pattern_match', 'synthetic_reasoning_natural:difficulty=easy', 'dyck_language:num_parenthesis_pairs=2'] as const;

/** Runs every model on every description into `<outputPath>/runs/v1/`; returns the run names per model. */
export async function runSuite(root: string, outputPath: string, instances: number): Promise<Record<string, string[]>> {
  const names: Record<string, string[]> = {};
  for (const [i, model] of MODELS.entries()) {
    const modelDir = join(root, model.replace('/', '_'));
    makeTinyOptModel(modelDir, 11 + 12 * i);
    registerLocalModel(model);
    const engine = await Engine.load(modelDir, { backend: new OrtBackend() });
    try {
      const tokenizer = loadTokenizerFolder(modelDir, model);
      const executor = new EngineExecutor(engine, tokenizer, { modelId: `${model}-seed${11 + 12 * i}`, maxBatchSize: 8 });
      const windowService = localOptWindowService(tokenizer, engine.description.maxPositions);
      names[model] = [];
      for (const description of DESCRIPTIONS) {
        for (const runSpec of constructRunSpecs(parseObjectSpec(`${description},model=${model}`))) {
          runSpec.adapter_spec.max_eval_instances = instances;
          runSpec.adapter_spec.num_train_trials = 1;
          const result = await runOne(runSpec, { outputPath, suite: SUITE, executor, windowService, offline: true, dataDir: join(root, 'data') });
          names[model]!.push(runSpec.name);
          void result;
        }
      }
    } finally {
      await engine.close();
    }
  }
  return names;
}
