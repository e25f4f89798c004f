import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { oneDnnStatus } from '@flexhelm/onednn-backend';
import { describe, expect, it } from 'vitest';
import { CaseRecorder } from '../check-result.js';
import { checkOneDnnBf16 } from './llama-onednn.js';

const MODEL = fileURLToPath(new URL('../../../../../shared/conformance/llama/llama-b', import.meta.url));
const available = existsSync(MODEL) && oneDnnStatus().available;

describe.skipIf(!available)('the Llama-family golden models on oneDNN bf16', () => {
  const golden = () => JSON.parse(readFileSync(`${MODEL}/golden.json`, 'utf8'));

  it('llama-b (GQA 8/2, llama3 rope scaling, head dim 8) passes at the bf16 tolerance and says how close it came', async () => {
    const rec = new CaseRecorder();
    const line = await checkOneDnnBf16(rec, golden(), `${MODEL}/bf16`, 'bf16/onednn-bf16');
    expect(rec.failures).toEqual([]);
    expect(rec.passed).toBe(20 + 30);
    expect(line).toMatch(/^bf16\/onednn-bf16: max \|Δlogit\| \d\.\d\de-\d \(tolerance 0\.1\), greedy ids 30\/30$/);
  });

  it('a golden greedy id the model does not produce, or logits off by more than 0.1, fail with what differed', async () => {
    const g = golden();
    // The last step: earlier ids are fed back, so changing one would change every later step too.
    g.greedy.generated_ids[1][9] = (g.greedy.generated_ids[1][9] + 1) % 1200;
    g.prompt_logits[0][10].logits[7] += 0.5;
    const rec = new CaseRecorder();
    const line = await checkOneDnnBf16(rec, g, `${MODEL}/bf16`, 'bf16/onednn-bf16');
    expect(rec.failures).toHaveLength(2);
    expect(rec.failures[0]).toMatch(/^bf16\/onednn-bf16\/prompt_logits\[0\]\[10\]: logit of token 7 off by [45]\.\d\de-1/);
    expect(rec.failures[1]).toMatch(/^bf16\/onednn-bf16\/greedy\[1\]\[9\]: greedy id \d+, golden \d+$/);
    expect(line).toMatch(/greedy ids 29\/30$/);
  });
});
