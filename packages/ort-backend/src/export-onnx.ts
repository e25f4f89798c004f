import { closeSync, copyFileSync, existsSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { commitTree, writeAll, writeFileAtomic } from '@flexhelm/atomic-write';
import { join } from 'node:path';
import { readFolderModel, readModelDescription, OPT_MODEL_TYPE, LlamaCheckpoint, optHfConfig, OptWeights, openTensorSource, transposeLayerTensors, type ModelDescription, type TensorSource } from '@flexhelm/engine';
import { isOptShaped, layerTensorsOf, type LayerTensors } from '@flexhelm/contract';
import { addLlamaFullModel } from './llama-onnx-graph.js';
import { encodeModel, GraphBuilder, OPSET, type OnnxValueInfo } from './onnx-writer.js';

/** Files copied along when present (the tokenizer, so transformers.js finds everything in one folder). */
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json', 'special_tokens_map.json', 'vocab.json', 'merges.txt', 'generation_config.json'];
/** Above this many weight bytes the model goes to `onnx/model.onnx_data` (protobuf files cap at 2 GiB). */
const INLINE_LIMIT = 1.5 * 2 ** 30;

export interface ExportOnnxOptions {
  /** Force (or forbid) ONNX external data; by default only for models above 1.5 GiB of fp32 weights. */
  externalData?: boolean;
}

/**
 * Writes `outDir/config.json` + `outDir/onnx/model.onnx` (+ `model.onnx_data` for big models), the layout
 * @huggingface/transformers loads with `AutoModelForCausalLM.from_pretrained(outDir, {dtype: 'fp32'})`.
 * Written into a temporary folder and renamed, so `outDir` appears complete or not at all.
 */
export function exportOnnx(modelDir: string, outDir: string, options: ExportOnnxOptions = {}): void {
  // OPT exports through its checkpoint reader; the others (rotary families) from their description. Without a
  // config.json, the folder reader's message says what is missing.
  const description = readFolderModel(modelDir);
  if (!isOptShaped(description)) {
    exportLlamaOnnx(modelDir, outDir, options);
    return;
  }
  exportOnnxFromSource(description, openTensorSource(modelDir, description.name), outDir, { ...options, copyFrom: modelDir });
}

/**
 * A Llama-family folder (Llama 2/3, Mistral, Qwen2) → the same layout: its config.json (float32), `onnx/model.onnx`
 * from {@link addLlamaFullModel}, the tokenizer and generation files.
 */
function exportLlamaOnnx(modelDir: string, outDir: string, options: ExportOnnxOptions): void {
  const d = readModelDescription(modelDir);
  const checkpoint = new LlamaCheckpoint(d, openTensorSource(modelDir));
  try {
    // fp32 bytes of the graph's weights (a tied head is stored twice: as the table and transposed as the head).
    let floats = d.vocabSize * d.hiddenSize * 2 + d.hiddenSize;
    for (let i = 0; i < d.layers; i++) for (const t of layerTensorsOf(d, i)) floats += t.shape.reduce((a, b) => a * b, 1);
    const hf = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>;
    hf.torch_dtype = 'float32';
    const build = (g: GraphBuilder) => {
      const embedding = checkpoint.embedding().tokens;
      return addLlamaFullModel(g, d, { tokens: embedding }, (i) => checkpoint.layer(i), checkpoint.head(embedding));
    };
    writeExport(outDir, 4 * floats, options, build, d.family, hf, modelDir);
  } finally {
    checkpoint.close();
  }
}

/**
 * An OPT checkpoint read through OPT's loader (`OptWeights`) → the same layout, the graph built from its description
 * by {@link addLlamaFullModel} (the onnxruntime backend's layer).
 */
export function exportOnnxFromSource(description: ModelDescription, source: TensorSource, outDir: string, options: ExportOnnxOptions & { copyFrom?: string } = {}): void {
  const weights = new OptWeights(description, source);
  const d = weights.description;
  try {
    let bytes = 0;
    for (const info of source.tensors.values()) bytes += 4 * info.shape.reduce((a, b) => a * b, 1);
    const build = (g: GraphBuilder) => {
      const embedding = weights.embedding();
      // The loader gives PyTorch's [out, in]; the graphs read the description's [in, out].
      const layer = (i: number) => transposeLayerTensors(d, weights.layer(i) as unknown as LayerTensors);
      return addLlamaFullModel(g, d, embedding, layer, weights.head(embedding.tokens));
    };
    writeExport(outDir, bytes, options, build, OPT_MODEL_TYPE, optHfConfig(d, 'float32'), options.copyFrom);
  } finally {
    weights.close();
  }
}

/** Builds the graph into `outDir.tmp-<pid>` (weights inline or in `model.onnx_data`), then syncs and renames it into place. */
function writeExport(
  outDir: string,
  weightBytes: number,
  options: ExportOnnxOptions,
  build: (g: GraphBuilder) => { inputs: OnnxValueInfo[]; outputs: OnnxValueInfo[] },
  graphName: string,
  hf: Record<string, unknown>,
  copyFrom: string | undefined,
): void {
  if (existsSync(outDir)) throw new Error(`exportOnnx: ${outDir} already exists; choose a new folder or delete it first`);
  const tmp = `${outDir}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(join(tmp, 'onnx'), { recursive: true });
  let dataFd: number | undefined;
  try {
    const external = options.externalData ?? weightBytes > INLINE_LIMIT;
    let dataOffset = 0;
    if (external) dataFd = openSync(join(tmp, 'onnx', 'model.onnx_data'), 'w');
    const g = new GraphBuilder(
      dataFd === undefined
        ? undefined
        : {
            location: 'model.onnx_data',
            threshold: 1024,
            append: (raw) => {
              const at = dataOffset;
              writeAll(dataFd!, raw);
              dataOffset += raw.length;
              return at;
            },
          },
    );
    const { inputs, outputs } = build(g);
    const model = encodeModel({ graphName, nodes: g.nodes, initializers: g.initializers, inputs, outputs, opset: OPSET });
    writeFileAtomic(join(tmp, 'onnx', 'model.onnx'), model);
    if (dataFd !== undefined) closeSync(dataFd);
    dataFd = undefined;
    if (external) hf['transformers.js_config'] = { use_external_data_format: true };
    writeFileAtomic(join(tmp, 'config.json'), `${JSON.stringify(hf, null, 2)}\n`);
    if (copyFrom) for (const f of TOKENIZER_FILES) if (existsSync(join(copyFrom, f))) copyFileSync(join(copyFrom, f), join(tmp, f));
    commitTree(tmp, outDir);
  } catch (err) {
    if (dataFd !== undefined) closeSync(dataFd);
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}
