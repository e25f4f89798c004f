import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readModelDescription } from '@flexhelm/engine';
import { loadTokenizerFolder } from '@flexhelm/tokenizer';
import { afterAll, describe, expect, it } from 'vitest';

// Runs the built binary, as a user would.
const main = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const flexhelm = (...args: string[]) => {
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};
const dir = mkdtempSync(join(tmpdir(), 'flexhelm-cli-make-model-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const json = (path: string) => JSON.parse(readFileSync(path, 'utf8'));

describe('flexhelm make-model for the Llama family', () => {
  it('writes a Llama 3.2-shaped model with its tokenizer (BOS by template, EOS ids in both configs)', () => {
    const out = join(dir, 'llama3');
    const r = flexhelm('make-model', '--config', '{"base":"llama-3.2-1b","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":1,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024,"chat":true}', '--out', out);
    expect(r.stderr).toBe(`wrote ${out}: llama (llama-3.2-1b), 2 layers, hidden 64, vocab 1024, bf16 with a llama3 tokenizer (chat template)\n`);
    expect(r.status).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'special_tokens_map.json', 'tokenizer.json', 'tokenizer_config.json']);
    const config = json(join(out, 'config.json'));
    // 768 byte-level tokens, then Llama 3's 256 special tokens: begin_of_text 768, end_of_text 769, eom 776, eot 777.
    expect([config.bos_token_id, config.eos_token_id, config.architectures, config.torch_dtype, config.tie_word_embeddings]).toEqual([768, [769, 776, 777], ['LlamaForCausalLM'], 'bfloat16', true]);
    expect(json(join(out, 'generation_config.json'))).toEqual({ _from_model_config: true, bos_token_id: 768, eos_token_id: [769, 776, 777], transformers_version: '4.47.1' });
    expect(json(join(out, 'tokenizer_config.json')).chat_template).toContain('<|start_header_id|>');
    const tok = loadTokenizerFolder(out);
    expect([tok.bosTokenId, tok.eosTokenId, tok.vocabSize]).toEqual([768, 777, 1024]);
    expect(readModelDescription(out).attention).toEqual({ heads: 4, kvHeads: 1, headDim: 16, bias: false });
    const exported = flexhelm('export-onnx', '--model', out, '--out', join(dir, 'llama3-onnx'));
    expect([exported.status, exported.stderr]).toEqual([0, `wrote ${join(dir, 'llama3-onnx')}/onnx/model.onnx\n`]);
    expect(json(join(dir, 'llama3-onnx', 'config.json'))).toMatchObject({ model_type: 'llama', torch_dtype: 'float32' });
    expect(existsSync(join(dir, 'llama3-onnx', 'tokenizer.json'))).toBe(true);
  });

  it('writes Mistral with a sentencepiece tokenizer, sharded, f16', () => {
    const out = join(dir, 'mistral');
    const r = flexhelm('make-model', '--config', '{"base":"mistral-7b-v0.1","hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1000,"sliding_window":8}', '--out', out, '--dtype', 'f16', '--shard-size', '100kB');
    expect(r.stderr).toMatch(/^wrote .*mistral: mistral \(mistral-7b-v0.1\), 2 layers, hidden 64, vocab 1000, f16, \d+ shards with a sentencepiece tokenizer\n$/);
    expect(existsSync(join(out, 'model.safetensors.index.json'))).toBe(true);
    expect(json(join(out, 'config.json'))).toMatchObject({ bos_token_id: 1, eos_token_id: 2, sliding_window: 8, torch_dtype: 'float16', model_type: 'mistral' });
    const tok = loadTokenizerFolder(out);
    // A 1000-id vocabulary has no "▁Hi"; the emoji is not a piece and falls back to its four UTF-8 bytes.
    const ids = tok.encode('Hi 🦙');
    expect(ids.map((id) => tok.idToToken(id))).toEqual(['▁H', 'i', '▁', '<0xF0>', '<0x9F>', '<0xA6>', '<0x99>']);
    expect(tok.decode(ids)).toBe('Hi 🦙');
  });

  it('reads a config.json of the family as --config', () => {
    const out = join(dir, 'from-file');
    const r = flexhelm('make-model', '--config', join(dir, 'llama3'), '--out', out, '--dtype', 'f32', '--no-tokenizer');
    expect(r.status).toBe(0);
    const a = json(join(dir, 'llama3', 'config.json'));
    const b = json(join(out, 'config.json'));
    expect({ ...b, torch_dtype: a.torch_dtype }).toEqual(a);
  });

  it('explains bad input with exit status 2 and leaves no folder', () => {
    const cases: [string[], RegExp][] = [
      [['--config', '{"base":"llama-9b"}'], /unknown base "llama-9b"; one of llama-3.2-1b, llama-3.2-3b/],
      [['--config', '{"base":"qwen2-0.5b","vocab_size":100}'], /a qwen tokenizer needs a vocabulary of at least 259 ids .* raise vocab_size/],
      [['--config', '{"base":"qwen2-0.5b","num_key_value_heads":5}'], /num_attention_heads 14 is not a multiple of num_key_value_heads 5/],
      [['--config', 'llama-3.2-1b', '--shard-size', 'lots'], /--shard-size must be a size such as 2000000, 500MB or 2GiB, got 'lots'/],
      [['--config', 'llama-3.2-1b', '--dtype', 'f64'], /--dtype must be f32, f16 or bf16, got 'f64'/],
      [['--config', '{"base":"opt-125m","chat":true}'], /OPT has no chat template/],
      [['--config', '{"base":"gemma-2-2b","vocab_size":300}'], /a gemma tokenizer needs a vocabulary of at least 365 ids/],
      [['--config', '{"model_type":"gpt9","hidden_size":64}'], /--config: model_type is "gpt9"; supported: opt, llama, mistral, qwen2, gemma2, phi3, olmo2/],
    ];
    for (const [args, message] of cases) {
      const out = join(dir, 'bad');
      const r = flexhelm('make-model', ...args, '--out', out);
      expect([r.status, r.stderr]).toEqual([2, expect.stringMatching(message)]);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(existsSync(out)).toBe(false);
    }
  });
});

describe('flexhelm make-model for Gemma 2, Phi-3 and OLMo 2', () => {
  const tiny = '"hidden_size":64,"num_attention_heads":4,"num_key_value_heads":2,"num_hidden_layers":2,"intermediate_size":128,"vocab_size":1024';
  it('writes Gemma 2 with its tokenizer: <bos> 2 added, <eos> and <end_of_turn> stop, Python floats for the soft-caps', () => {
    const out = join(dir, 'gemma2');
    const r = flexhelm('make-model', '--config', `{"base":"gemma-2-2b",${tiny},"chat":true}`, '--out', out);
    expect([r.status, r.stderr]).toEqual([0, `wrote ${out}: gemma2 (gemma-2-2b), 2 layers, hidden 64, vocab 1024, bf16 with a gemma tokenizer (chat template)\n`]);
    const config = json(join(out, 'config.json'));
    expect([config.bos_token_id, config.eos_token_id, config.pad_token_id, config.architectures, config.head_dim, config.attn_logit_softcapping]).toEqual([2, [1, 107], 0, ['Gemma2ForCausalLM'], 16, 50]);
    expect(readFileSync(join(out, 'config.json'), 'utf8')).toContain('"final_logit_softcapping": 30.0,');
    const tok = loadTokenizerFolder(out);
    expect([tok.bosTokenId, tok.eosTokenId, tok.tokenToId('<end_of_turn>')]).toEqual([2, 1, 107]);
    const d = readModelDescription(out);
    expect([d.family, d.embedding.tiedHead, d.attention.slidingWindowLayers, d.norm.kind]).toEqual(['gemma2', true, 'even', 'rmsnorm-plus-one']);
  });

  it('writes Phi-3 (fused projections, its chat tokens after 32000-style ids) and reads its config.json back as --config', () => {
    const out = join(dir, 'phi3');
    const r = flexhelm('make-model', '--config', `{"base":"phi-3-mini-128k",${tiny}}`, '--out', out, '--dtype', 'f32');
    expect(r.status, r.stderr).toBe(0);
    const config = json(join(out, 'config.json'));
    // 1024 ids: 1013 sentencepiece ids, then <|endoftext|> 1013 … <|end|> 1020 … <|user|> 1023.
    expect([config.bos_token_id, config.eos_token_id, config.pad_token_id, config.rope_scaling.short_factor.length]).toEqual([1, 1013, 1013, 8]);
    const tok = loadTokenizerFolder(out);
    expect([tok.bosTokenId, tok.tokenToId('<|end|>'), tok.tokenToId('<|user|>')]).toEqual([undefined, 1020, 1023]);
    // A config.json builds on its family's first base (phi-3-mini-4k) with every field of the file.
    const again = join(dir, 'phi3-again');
    expect(flexhelm('make-model', '--config', out, '--out', again, '--dtype', 'f32', '--no-tokenizer').status).toBe(0);
    expect(readModelDescription(again)).toEqual(readModelDescription(out));
  });

  it('writes OLMo 2 with no BOS id, <|endoftext|> as EOS and <|pad|> as pad', () => {
    const out = join(dir, 'olmo2');
    expect(flexhelm('make-model', '--config', `{"base":"olmo-2-7b",${tiny}}`, '--out', out).status).toBe(0);
    const config = json(join(out, 'config.json'));
    // 1024 ids: 1002 byte-level ids, then <|extra_id_0|> 1002, <|endoftext|> 1003 … <|pad|> 1023.
    expect([config.bos_token_id, config.eos_token_id, config.pad_token_id]).toEqual([null, 1003, 1023]);
    expect(json(join(out, 'generation_config.json'))).toEqual({ _from_model_config: true, eos_token_id: 1003, pad_token_id: 1023, transformers_version: '4.47.1' });
    const tok = loadTokenizerFolder(out);
    expect([tok.bosTokenId, tok.eosTokenId, tok.padTokenId]).toEqual([undefined, 1003, 1023]);
    const d = readModelDescription(out);
    expect([d.bosTokenId, d.attention.qkNorm, d.norm.placement]).toEqual([undefined, 'projection', 'post-branch']);
  });
});
