import { exportOnnx } from '@flexhelm/ort-backend';
import type { Command } from '../command.js';
import { modelFolderOption, PATH_ALIAS_DESCRIPTION } from '../option-values.js';

/** `flexhelm export-onnx`: one ONNX graph in the layout @huggingface/transformers loads. */
export const exportOnnxCommand: Command = {
  name: 'export-onnx',
  summary: 'Export an OPT, Llama, Mistral or Qwen2 model folder as ONNX for @huggingface/transformers (transformers.js)',
  options: {
    model: { type: 'string', valueName: 'DIR', description: 'model folder (config.json + safetensors or FlexLLMGen .npy files)' },
    path: { type: 'string', valueName: 'DIR', description: PATH_ALIAS_DESCRIPTION },
    out: { type: 'string', short: 'o', valueName: 'DIR2', description: 'folder to create (must not exist)' },
    'external-data': { type: 'boolean', description: 'store weights in onnx/model.onnx_data (automatic above 1.5 GiB)' },
  },
  details: [
    'Writes DIR2/config.json, DIR2/onnx/model.onnx (fp32; + model.onnx_data for big models) and copies the tokenizer',
    'files. Load it with AutoModelForCausalLM.from_pretrained(<DIR2 name>, {dtype: "fp32"}) and env.localModelPath.',
    '',
    'example:',
    '  flexhelm export-onnx --model models/opt-125m-random --out models/opt-125m-onnx',
  ].join('\n'),
  run({ options, stderr, usageError }) {
    const model = modelFolderOption(options, 'give --model DIR and --out DIR2');
    const out = options.out as string | undefined;
    if (!out) throw usageError('give --model DIR and --out DIR2');
    try {
      exportOnnx(model, out, options['external-data'] ? { externalData: true } : {});
    } catch (err) {
      throw usageError((err as Error).message);
    }
    stderr.write(`wrote ${out}/onnx/model.onnx\n`);
  },
};
