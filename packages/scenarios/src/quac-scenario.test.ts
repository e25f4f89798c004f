import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { QUAC_BASE_URL, QuACScenario } from './quac-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const sample = (i: number, n: number) => ({
  title: `T${i}`,
  background: `Bg ${i}`,
  section_title: `S${i}`,
  paragraphs: [
    {
      context: `Passage ${i} text. CANNOTANSWER`,
      qas: Array.from({ length: n }, (_, j) => ({
        question: `Q${i}.${j}?`,
        orig_answer: { text: `O${i}.${j}` },
        answers: j % 3 === 0 ? [{ text: 'CANNOTANSWER' }] : [{ text: `A${j}` }, { text: `A${j}` }, { text: `B${j}` }],
      })),
    },
  ],
});
// HELM 0.2.1's own QuACScenario on these files (Python 3.11), as [prompt, references, split].
const EXPECTED: [string, string[], string][] = [["Title: T0\n\nBackground: Bg 0\n\nSection: S0\nPassage: Passage 0 text.\n\nQuestion: Q0.0?\nAnswer: O0.0\n\nQuestion: Q0.2?", ["A2", "B2"], "train"], ["Title: T1\n\nBackground: Bg 1\n\nSection: S1\nPassage: Passage 1 text.\n\nQuestion: Q1.0?\nAnswer: O1.0\n\nQuestion: Q1.1?\nAnswer: O1.1\n\nQuestion: Q1.3?", ["CANNOTANSWER", "Not enough information", "Cannot answer", "Do not know"], "train"], ["Title: T2\n\nBackground: Bg 2\n\nSection: S2\nPassage: Passage 2 text.\n\nQuestion: Q2.0?\nAnswer: O2.0\n\nQuestion: Q2.2?", ["A2", "B2"], "train"], ["Title: T3\n\nBackground: Bg 3\n\nSection: S3\nPassage: Passage 3 text.\n\nQuestion: Q3.0?\nAnswer: O3.0\n\nQuestion: Q3.1?\nAnswer: O3.1\n\nQuestion: Q3.2?\nAnswer: O3.2\n\nQuestion: Q3.4?", ["A4", "B4"], "train"], ["Title: T4\n\nBackground: Bg 4\n\nSection: S4\nPassage: Passage 4 text.\n\nQuestion: Q4.0?\nAnswer: O4.0\n\nQuestion: Q4.1?\nAnswer: O4.1\n\nQuestion: Q4.2?\nAnswer: O4.2\n\nQuestion: Q4.3?\nAnswer: O4.3\n\nQuestion: Q4.4?\nAnswer: O4.4\n\nQuestion: Q4.6?", ["CANNOTANSWER", "Not enough information", "Cannot answer", "Do not know"], "train"], ["Title: T5\n\nBackground: Bg 5\n\nSection: S5\nPassage: Passage 5 text.\n\nQuestion: Q5.0?\nAnswer: O5.0\n\nQuestion: Q5.1?\nAnswer: O5.1\n\nQuestion: Q5.2?\nAnswer: O5.2\n\nQuestion: Q5.3?\nAnswer: O5.3\n\nQuestion: Q5.5?", ["A5", "B5"], "train"], ["Title: T10\n\nBackground: Bg 10\n\nSection: S10\nPassage: Passage 10 text.\n\nQuestion: Q10.0?\nAnswer: O10.0\n\nQuestion: Q10.1?\nAnswer: O10.1\n\nQuestion: Q10.3?", ["CANNOTANSWER", "Not enough information", "Cannot answer", "Do not know"], "valid"], ["Title: T11\n\nBackground: Bg 11\n\nSection: S11\nPassage: Passage 11 text.\n\nQuestion: Q11.0?\nAnswer: O11.0\n\nQuestion: Q11.1?\nAnswer: O11.1\n\nQuestion: Q11.2?\nAnswer: O11.2\n\nQuestion: Q11.4?", ["A4", "B4"], "valid"], ["Title: T12\n\nBackground: Bg 12\n\nSection: S12\nPassage: Passage 12 text.\n\nQuestion: Q12.0?\nAnswer: O12.0\n\nQuestion: Q12.1?\nAnswer: O12.1\n\nQuestion: Q12.2?\nAnswer: O12.2\n\nQuestion: Q12.3?\nAnswer: O12.3\n\nQuestion: Q12.5?", ["A5", "B5"], "valid"]];

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('QuACScenario', () => {
  it('builds dialogue prompts with random.seed(0) turn choices', async () => {
    fixture = await sourceFixture({
      [`${QUAC_BASE_URL}/train_v0.2.json`]: JSON.stringify({ data: Array.from({ length: 6 }, (_, i) => sample(i, 3 + i)) }),
      [`${QUAC_BASE_URL}/val_v0.2.json`]: JSON.stringify({ data: Array.from({ length: 3 }, (_, i) => sample(10 + i, 4 + 2 * i)) }),
    });
    const instances = await createScenario(objectSpec(QuACScenario.className, {})).getInstances(fixture.context);
    expect(instances.map((i) => [i.input.text, i.references.map((r) => r.output.text), i.split])).toEqual(EXPECTED);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new QuACScenario().getInstances(context), `${QUAC_BASE_URL}/train_v0.2.json`);
  });
});
