import { pyRstrip } from '@flexhelm/python-compat';
import { EVAL_SPLITS, HelmError, TRAIN_SPLIT, firstCorrectReference, type Instance, type RequestState, type ScenarioState } from '@flexhelm/core';
import { Adapter } from './adapter.js';
import { promptText, type Prompt } from './prompt.js';
import { sampleExamples } from './sample-examples.js';

function codePointLength(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

export function isEvalSplit(split: string | undefined): boolean {
  return (EVAL_SPLITS as readonly (string | undefined)[]).includes(split);
}

/**
 * HELM 0.2.1's `InContextLearningAdapter`: per train trial, sample the in-context examples (seed = trial index), then
 * build each eval instance's prompt (instructions, train blocks, eval block), dropping the last train block until it
 * fits the window and cutting from the right when no train block is left.
 */
export abstract class InContextLearningAdapter extends Adapter {
  protected trainTrialIndex = 0;
  protected trainInstances: Instance[] = [];

  adapt(instances: readonly Instance[], parallelism = 1): ScenarioState {
    if (!Number.isInteger(parallelism) || parallelism < 1) throw new HelmError('ValueError', `parallelism must be a positive integer, got ${parallelism}`);
    const allTrain = instances.filter((inst) => inst.split === TRAIN_SPLIT);
    const evalInstances = instances.filter((inst) => isEvalSplit(inst.split));
    const states: RequestState[] = [];
    for (let trial = 0; trial < this.adapterSpec.num_train_trials; trial++) {
      this.trainTrialIndex = trial;
      this.trainInstances = this.sampleExamples(allTrain, trial);
      for (const evalInstance of evalInstances) states.push(...this.generateRequests(evalInstance));
    }
    return { adapter_spec: this.adapterSpec, request_states: states };
  }

  sampleExamples(allTrainInstances: readonly Instance[], seed: number): Instance[] {
    return sampleExamples(allTrainInstances, this.adapterSpec.max_train_instances, seed);
  }

  /** The in-context examples the current trial uses (after {@link adapt} or {@link sampleExamples}). */
  get currentTrainInstances(): readonly Instance[] {
    return this.trainInstances;
  }

  constructPrompt(trainInstances: readonly Instance[], evalInstance: Instance, includeOutput: boolean, referenceIndex: number | undefined): Prompt {
    const spec = this.adapterSpec;
    const prompt: Prompt = {
      globalPrefix: spec.global_prefix,
      instancePrefix: spec.instance_prefix,
      substitutions: spec.substitutions,
      instructionsBlock: spec.instructions,
      trainInstanceBlocks: trainInstances.map((inst) => this.constructExamplePrompt(inst, true, undefined)),
      evalInstanceBlock: this.constructExamplePrompt(evalInstance, includeOutput, referenceIndex),
    };
    return this.makePromptFit(prompt);
  }

  /** `input_prefix + input + input_suffix`, then the output (first correct reference, "n/a", or the given reference). */
  constructExamplePrompt(inst: Instance, includeOutput: boolean, referenceIndex: number | undefined): string {
    const spec = this.adapterSpec;
    let result = spec.input_prefix + inst.input.text + spec.input_suffix;
    let output: string;
    if (referenceIndex === undefined) output = firstCorrectReference(inst)?.output.text ?? 'n/a';
    else {
      const ref = inst.references[referenceIndex];
      if (!ref) throw new HelmError('Exception', `reference_index ${referenceIndex} is out of range for an instance with ${inst.references.length} references`);
      output = ref.output.text;
    }
    result += includeOutput ? spec.output_prefix + output + spec.output_suffix : pyRstrip(spec.output_prefix);
    return result;
  }

  /** Drops the last train block until the prompt fits `max_tokens` of completion; with none left, cuts from the right. */
  protected makePromptFit(prompt: Prompt): Prompt {
    const maxTokens = this.adapterSpec.max_tokens;
    while (prompt.trainInstanceBlocks.length > 0) {
      if (this.windowService.fitsWithinContextWindow(promptText(prompt), maxTokens)) return prompt;
      prompt = { ...prompt, trainInstanceBlocks: prompt.trainInstanceBlocks.slice(0, -1) };
    }
    const text = promptText(prompt);
    const truncated = this.windowService.truncateFromRight(text, maxTokens);
    return codePointLength(truncated) < codePointLength(text) ? { ...prompt, truncatedText: truncated } : prompt;
  }
}
