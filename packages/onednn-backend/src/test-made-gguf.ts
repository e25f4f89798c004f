import { join } from 'node:path';
import { Engine, makeHubModel, type DecoderBackend, type ModelDescription, type TensorSource } from '@flexhelm/engine';
import { exportGguf, GgufTensorSource, importGguf } from '@flexhelm/gguf';
import { writeFamilyTokenizerFolder } from '@flexhelm/tokenizer';

/** Llama 3.2's kinds at a tiny size: GQA 4/2, head 16, FFN 96 (down_proj's 3 blocks per row: an odd last block). */
const TINY_LLAMA = { base: 'llama-3.2-1b', hidden_size: 64, num_attention_heads: 4, num_key_value_heads: 2, head_dim: 16, num_hidden_layers: 2, intermediate_size: 96, vocab_size: 700 };

/** The same kinds with rows of whole 256-value super-blocks (K-quants): hidden 256, head 64, FFN 512. */
const WIDE_LLAMA = { ...TINY_LLAMA, hidden_size: 256, head_dim: 64, intermediate_size: 512 };

/** Mixtral's kinds at the tiny size: 4 experts of FFN 96, 2 chosen a token. */
const TINY_MIXTRAL = { ...TINY_LLAMA, base: 'mixtral-8x7b', num_local_experts: 4, num_experts_per_tok: 2 };

export type MadeGgufType = 'Q8_0' | 'Q4_0' | 'F16' | 'Q4_K_M' | 'Q5_K_M';

export interface MadeGguf {
  file: string;
  description: ModelDescription;
  /** An engine reading the file in place, as `flexhelm run` does; the tensors it asks for are logged in `reads`. */
  load(backend: DecoderBackend | 'reference'): Promise<Engine>;
  reads: string[];
}

/** `source`, logging each tensor it is asked for to `log`. */
function countingReads(source: TensorSource, log: string[]): TensorSource {
  const read = (name: string) => {
    log.push(name);
    return source.read(name);
  };
  return { tensors: source.tensors, read, close: () => source.close() };
}

/**
 * A made model (`TINY_LLAMA`, `WIDE_LLAMA` for the K-quant mixes, `TINY_MIXTRAL` with `moe`) exported by `exportGguf`
 * as `type` into `root`, imported as `flexhelm run` imports a GGUF file.
 */
export function makeGguf(root: string, type: MadeGgufType, options: { moe?: boolean } = {}): MadeGguf {
  const name = `${options.moe ? 'moe-' : ''}${type}`;
  const hub = join(root, `hub-${name}`);
  makeHubModel({ config: options.moe ? TINY_MIXTRAL : /K_M$/.test(type) ? WIDE_LLAMA : TINY_LLAMA, outDir: hub, seed: 9, tokenizer: (d, style, o) => writeFamilyTokenizerFolder(d, style, o) });
  const file = join(root, `tiny-${name}.gguf`);
  exportGguf({ folder: hub, out: file, type });
  const { description } = importGguf(file, join(root, `data-${name}`));
  const reads: string[] = [];
  const load = (backend: DecoderBackend | 'reference') => Engine.fromSource(description, countingReads(new GgufTensorSource(file), reads), { backend });
  return { file, description, load, reads };
}
