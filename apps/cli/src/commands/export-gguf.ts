import { existsSync } from 'node:fs';
import { EXPORT_TYPES, exportGguf } from '@flexhelm/gguf';
import type { Command } from '../command.js';
import { modelFolderOption, PATH_ALIAS_DESCRIPTION } from '../option-values.js';

/** `flexhelm export-gguf`: one GGUF file llama.cpp (and ollama) load, and `--model FILE.gguf` reads back. */
export const exportGgufCommand: Command = {
  name: 'export-gguf',
  summary: 'Export a Llama, Mistral, Qwen2, Gemma 2, Phi-3 or OLMo 2 model folder as one GGUF file for llama.cpp',
  options: {
    model: { type: 'string', valueName: 'DIR', description: 'model folder (config.json, safetensors, tokenizer.json)' },
    path: { type: 'string', valueName: 'DIR', description: PATH_ALIAS_DESCRIPTION },
    out: { type: 'string', short: 'o', valueName: 'FILE', description: 'GGUF file to create (must not exist)' },
    type: { type: 'string', valueName: 'TYPE', description: `type of the matrices: ${EXPORT_TYPES.join(', ')} (default F16)` },
  },
  details: [
    'Writes the hyper-parameters, the tokenizer and chat template, and the tensors under llama.cpp\'s names (llama q/k',
    'in its rotary order, Gemma norms as 1 + w); 1-D tensors stay F32, rows not of whole 32-value blocks fall back to F16.',
    'The file appears complete or not at all.',
    '',
    'example:',
    '  flexhelm export-gguf --model models/llama-tiny --out llama-tiny-q8_0.gguf --type Q8_0',
  ].join('\n'),
  run({ options, stderr, usageError }) {
    const model = modelFolderOption(options, 'give --model DIR and --out FILE');
    const out = options.out as string | undefined;
    if (!out) throw usageError('give --model DIR and --out FILE');
    if (existsSync(out)) throw usageError(`--out ${out} already exists; choose a new file name or delete it first`);
    const type = String(options.type ?? 'F16').toUpperCase();
    if (!(EXPORT_TYPES as readonly string[]).includes(type)) throw usageError(`--type ${options.type}: one of ${EXPORT_TYPES.join(', ')}`);
    let warnings: string[];
    try {
      ({ warnings } = exportGguf({ folder: model, out, type: type as (typeof EXPORT_TYPES)[number] }));
    } catch (err) {
      // The library's messages name it (`export-gguf: …`); the CLI's prefix already does.
      throw usageError((err as Error).message.replace(/^export-gguf: /, ''));
    }
    for (const w of warnings) stderr.write(`warning: ${w}\n`);
    stderr.write(`wrote ${out}\n`);
  },
};
