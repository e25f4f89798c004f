import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generate } from './generate.js';
import { OptEngine } from './opt-engine.js';

interface LlamaGolden {
  prompts: number[][];
  echo: { prompt_token_logprobs: (number | null)[][] };
  greedy: { max_new_tokens: number; generated_ids: number[][]; token_logprobs: number[][] };
}

// The golden data sits beside the checkout (../shared/conformance), as the conformance runner expects it.
const llama = fileURLToPath(new URL('../../../../shared/conformance/llama', import.meta.url));

describe.skipIf(!existsSync(llama) && !process.env.CI)('generate() on the Llama-family golden models (transformers 4.47.1)', () => {
  // mistral-a: 21-token sequences past its window of 8; llama-b: GQA 8/2, llama3 RoPE scaling, two bf16 shards.
  it.each([
    ['mistral-a', 'f32'],
    ['llama-b', 'bf16-sharded'],
  ])('%s/%s: greedy ids exact, token and echo log-probs within 1e-4, through a left-padded batch', { timeout: 120_000 }, async (model, folder) => {
    const golden = JSON.parse(readFileSync(join(llama, model, 'golden.json'), 'utf8')) as LlamaGolden;
    const engine = await OptEngine.load(join(llama, model, folder), { backend: 'reference' });
    try {
      expect(engine.description.family).toBe(model === 'mistral-a' ? 'mistral' : 'llama');
      const results = await generate(
        engine,
        golden.prompts.map((prompt) => ({ prompt, maxNewTokens: golden.greedy.max_new_tokens, echoPrompt: true, stopAtEos: false })),
        { maxBatchSize: golden.prompts.length },
      );
      results.forEach((r, b) => {
        const c = r.completions[0]!;
        expect(c.tokens.map((t) => t.id)).toEqual(golden.greedy.generated_ids[b]);
        c.tokens.forEach((t, s) => {
          expect(Math.abs(t.logprob! - golden.greedy.token_logprobs[b]![s]!)).toBeLessThan(1e-4);
        });
        expect(c.promptTokens![0]!.logprob).toBeNull();
        c.promptTokens!.slice(1).forEach((t, j) => {
          expect(Math.abs(t.logprob! - golden.echo.prompt_token_logprobs[b]![j + 1]!)).toBeLessThan(1e-4);
        });
      });
    } finally {
      await engine.close();
    }
  });
});
