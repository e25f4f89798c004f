import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { generate, Engine, ModelFileError, type GenerationRequest, type ScoredToken } from '@flexhelm/engine';
import { resolveDataDir } from '@flexhelm/downloads';
import { GgufTensorSource, importGguf, isGgufPath, type ImportedGguf } from '@flexhelm/gguf';
import { promptInput } from '@flexhelm/runner';
import { loadTokenizerFolder } from '@flexhelm/tokenizer';
import type { Command } from '../command.js';
import { integerOption, modelFolderOption, PATH_ALIAS_DESCRIPTION } from '../option-values.js';
import { UsageError } from '../usage-error.js';
import { OrtBackend } from '@flexhelm/ort-backend';

function numberOption(value: unknown, flag: string, min: number, max = Infinity): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max) throw new UsageError(`--${flag} must be a number in [${min}, ${max}], got '${String(value)}'`);
  return n;
}

/** `flexhelm generate`: completions with logprobs from a local model folder or GGUF file. */
export const generateCommand: Command = {
  name: 'generate',
  summary: 'Generate text with a local model folder or GGUF file (JSON with tokens and logprobs)',
  options: {
    model: { type: 'string', valueName: 'DIR|FILE', description: 'model folder (config.json + weights, and tokenizer files for --prompt), or a GGUF file (its config and tokenizer written once under --data-dir, weights read from the file)' },
    'data-dir': { type: 'string', valueName: 'DIR', description: "where a GGUF file's config and tokenizer go (default $FLEXHELM_DATA_DIR or ~/.cache/flexhelm)" },
    path: { type: 'string', valueName: 'DIR', description: PATH_ALIAS_DESCRIPTION },
    prompt: { type: 'string', short: 'p', multiple: true, valueName: 'TEXT', description: 'a prompt (repeat for a batch); the BOS its tokenizer adds is prepended (OPT: </s>; Qwen2: none)' },
    'prompt-ids': { type: 'string', multiple: true, valueName: 'IDS', description: 'a prompt as comma-separated token ids (no tokenizer needed)' },
    'max-new-tokens': { type: 'string', valueName: 'N', description: 'tokens to generate (default 16; 0 with --echo scores the prompt)' },
    temperature: { type: 'string', valueName: 'T', description: '0 = greedy (default)' },
    'top-p': { type: 'string', valueName: 'P', description: 'nucleus sampling mass (default 1)' },
    'top-k': { type: 'string', valueName: 'K', description: 'sample among the K most likely tokens (default off)' },
    n: { type: 'string', valueName: 'N', description: 'completions per prompt (default 1)' },
    seed: { type: 'string', valueName: 'S', description: 'sampling seed (default 0)' },
    stop: { type: 'string', multiple: true, valueName: 'TEXT', description: 'stop sequence (repeatable)' },
    logprobs: { type: 'string', valueName: 'K', description: 'also report the K most likely tokens per position' },
    echo: { type: 'boolean', description: 'include the prompt tokens with their logprobs' },
    backend: { type: 'string', valueName: 'B', description: 'onnxruntime (default) or reference (plain TS, slow)' },
    'batch-size': { type: 'string', valueName: 'N', description: 'rows per forward batch (default 8)' },
  },
  details: [
    'Output (stdout): {"model", "results": [{"prompt", "completions": [{"text", "finish_reason", "sum_logprob",',
    '"tokens": [{"id", "text", "logprob", "top_logprobs"}], "prompt_tokens"?}]}]}. Logprobs are log-softmax of the',
    'untempered fp32 logits; the first prompt token has logprob null (nothing predicts it).',
    '',
    'examples:',
    '  flexhelm generate --model models/opt-125m-random --prompt "Hello" --max-new-tokens 8 --logprobs 3',
    '  flexhelm generate --model tiny --prompt-ids 2,17,250 --max-new-tokens 0 --echo',
    '  flexhelm generate --model ./model-Q4_K_M.gguf --prompt "Hello" --max-new-tokens 8',
  ].join('\n'),
  async run({ options, stdout, usageError }) {
    const texts = (options.prompt as string[] | undefined) ?? [];
    const idLists = (options['prompt-ids'] as string[] | undefined) ?? [];
    // A GGUF file: its config and tokenizer in a small folder of the data dir, its weights read from the file itself.
    const given = (options.model ?? options.path) as string | undefined;
    const isGguf = given !== undefined && isGgufPath(given) && existsSync(given) && statSync(given).isFile();
    const folder = isGguf ? undefined : modelFolderOption(options, 'give --model DIR (or a GGUF file)');
    if (texts.length + idLists.length === 0) throw usageError('give at least one --prompt TEXT or --prompt-ids IDS');
    const gguf = isGguf ? importGgufOrExplain(given, options['data-dir'] as string | undefined, usageError) : undefined;
    const modelDir = gguf?.folder ?? folder!;
    const backend = (options.backend as string | undefined) ?? 'onnxruntime';
    if (backend !== 'onnxruntime' && backend !== 'reference') throw usageError(`--backend must be onnxruntime or reference, got '${backend}'`);
    const hasTokenizer = existsSync(join(modelDir, 'tokenizer.json')) || existsSync(join(modelDir, 'vocab.json'));
    if ((texts.length || options.stop) && !hasTokenizer) throw usageError(`${modelDir} has no tokenizer files; use --prompt-ids and no --stop, or add tokenizer.json`);
    const tokenizer = hasTokenizer ? loadTokenizerFolder(modelDir) : undefined;
    const decode = (ids: number[]) => (tokenizer ? tokenizer.decode(ids) : ids.join(' '));
    const tokenText = (id: number) => (tokenizer ? tokenizer.decode([id]) : String(id));

    let engine: Engine;
    try {
      const compute = backend === 'onnxruntime' ? new OrtBackend() : backend;
      engine = gguf ? await Engine.fromSource(gguf.description, new GgufTensorSource(gguf.gguf), { backend: compute }) : await Engine.load(modelDir, { backend: compute });
    } catch (err) {
      throw usageError((err as Error).message);
    }
    try {
      const prompts = [
        ...texts.map((t) => ({ label: t, ids: promptInput((tokenizer!.encode(t) as number[]).map(Number), engine, tokenizer!).ids })),
        ...idLists.map((s) => {
          const ids = s.split(',').map((x) => Number(x.trim()));
          if (ids.some((x) => !Number.isInteger(x) || x < 0)) throw usageError(`--prompt-ids must be comma-separated non-negative integers, got '${s}'`);
          return { label: s, ids };
        }),
      ];
      const settings: Omit<GenerationRequest, 'prompt'> = {
        maxNewTokens: integerOption(options['max-new-tokens'], 'max-new-tokens', 0) ?? 16,
        temperature: numberOption(options.temperature, 'temperature', 0) ?? 0,
        topP: numberOption(options['top-p'], 'top-p', 1e-9, 1) ?? 1,
        topK: integerOption(options['top-k'], 'top-k', 0) ?? 0,
        n: integerOption(options.n, 'n', 1) ?? 1,
        seed: integerOption(options.seed, 'seed', 0) ?? 0,
        stopSequences: (options.stop as string[] | undefined) ?? [],
        topLogprobs: integerOption(options.logprobs, 'logprobs', 0) ?? 0,
        echoPrompt: Boolean(options.echo),
      };
      let results: Awaited<ReturnType<typeof generate>>;
      try {
        results = await generate(
          engine,
          prompts.map((p) => ({ ...settings, prompt: p.ids })),
          { decode, maxBatchSize: integerOption(options['batch-size'], 'batch-size', 1) ?? 8 },
        );
      } catch (err) {
        throw usageError((err as Error).message);
      }
      const tokenJson = (t: ScoredToken) => ({
        id: t.id,
        text: tokenText(t.id),
        logprob: t.logprob,
        top_logprobs: Object.fromEntries(t.top.map((x) => [tokenText(x.id), x.logprob])),
      });
      const output = {
        model: engine.description.name,
        results: results.map((r, i) => ({
          prompt: prompts[i]!.label,
          completions: r.completions.map((c) => ({
            text: decode(c.tokens.map((t) => t.id)),
            finish_reason: c.finishReason,
            ...(c.stopSequence !== undefined ? { stop_sequence: c.stopSequence } : {}),
            sum_logprob: c.sumLogprob,
            tokens: c.tokens.map(tokenJson),
            ...(c.promptTokens ? { prompt_tokens: c.promptTokens.map(tokenJson) } : {}),
          })),
        })),
      };
      stdout.write(`${JSON.stringify(output, null, 2)}\n`);
    } finally {
      await engine.close();
    }
  },
};

/** `importGguf` into the data dir, a file that is no model (`ModelFileError`: it names the file and the key) a usage error. */
function importGgufOrExplain(file: string, dataDir: string | undefined, usageError: (message: string) => Error): ImportedGguf {
  try {
    return importGguf(file, resolveDataDir({ dataDir }));
  } catch (err) {
    if (err instanceof ModelFileError) throw usageError(err.message);
    throw err;
  }
}
