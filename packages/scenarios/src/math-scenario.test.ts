import { tarArchive } from '@flexhelm/downloads/testing';
import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { MATH_DATA_URL, MATHScenario, readMathSplit } from './math-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

const problem = (type: string, level: string, problemText: string, solution: string) => JSON.stringify({ problem: problemText, level, type, solution });

/** MATH.tar's layout: MATH/{train,test}/{subject}/{n}.json. */
const ARCHIVE = tarArchive({
  'MATH/train/algebra/1.json': problem('Algebra', 'Level 2', 'Solve $x+1=3$.', 'So $x = \\boxed{2}$.'),
  'MATH/train/algebra/2.json': problem('Algebra', 'Level 2', 'No box here.', 'The answer is 5.'),
  'MATH/train/algebra/3.json': problem('Algebra', 'Level 3', 'Harder.', '$\\boxed{\\frac{1}{2}}$'),
  'MATH/train/geometry/1.json': problem('Geometry', 'Level 2', 'Area?', '$\\boxed{4}$'),
  'MATH/test/algebra/7.json': problem('Algebra', 'Level 2', 'Nested $\\boxed{1}$?', 'First \\boxed{1}, finally \\boxed{\\sqrt{2}}.'),
  'MATH/test/algebra/.hidden.json': problem('Algebra', 'Level 2', 'Hidden', '\\boxed{0}'),
  'MATH/test/algebra/8.json': problem('Algebra', 'Level 2', 'fbox', '\\fbox{3}'),
});

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const pair = (i: { input: { text: string }; references: { output: { text: string } }[]; split?: string }) => [i.split, i.input.text, i.references[0]!.output.text];

describe('MATHScenario', () => {
  it('keeps the subject and level, answers with the last \\boxed{} and skips problems without one', async () => {
    fixture = await sourceFixture({ [MATH_DATA_URL]: ARCHIVE });
    const instances = await createScenario(objectSpec(MATHScenario.className, { subject: 'algebra', level: '2' })).getInstances(fixture.context);
    expect(instances.map(pair)).toEqual([
      ['train', 'Solve $x+1=3$.', '2'],
      ['test', 'Nested $\\boxed{1}$?', '\\sqrt{2}'],
    ]);
    const cot = await new MATHScenario('algebra', '2', false, true).getInstances(fixture.context);
    expect(cot.map(pair).map((p) => p[2])).toEqual(['So $x = \\boxed{2}$.', 'The answer is 5.', 'First \\boxed{1}, finally \\boxed{\\sqrt{2}}.', '\\fbox{3}']);
    const official = await new MATHScenario('algebra', '3', true).getInstances(fixture.context);
    expect(official.filter((i) => i.split === 'train').map((i) => i.references[0]!.output.text)).toEqual(['1', '15', '\\sqrt{59}', '\\frac{1}{32}', '181', '50', '2', '3']);
    expect(official[0]!.input.text).toBe('What is $\\left(\\frac{7}{8}\\right)^3 \\cdot \\left(\\frac{7}{8}\\right)^{-3}$?');
    expect(official.filter((i) => i.split === 'test')).toEqual([]);
  });

  it('reads files in directory (glob) order, skipping hidden ones', async () => {
    fixture = await sourceFixture({ [MATH_DATA_URL]: ARCHIVE });
    await new MATHScenario('geometry', '2').getInstances(fixture.context);
    const test = await readMathSplit(`${fixture.context.outputPath}/MATH`, 'test');
    expect(test.map((e) => e.problem).sort()).toEqual(['Nested $\\boxed{1}$?', 'fbox']);
  });

  it('refuses an unknown subject and official examples with chain of thought', () => {
    expect(() => new MATHScenario('calculus', '1')).toThrow(/unknown MATH subject/);
    expect(() => createScenario(objectSpec(MATHScenario.className, { subject: 'algebra', level: '1', use_official_examples: true, use_chain_of_thought: true }))).toThrow(
      /Cannot use official examples/,
    );
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new MATHScenario('algebra', '1').getInstances(context), MATH_DATA_URL);
  });
});
