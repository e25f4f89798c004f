import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { CIVIL_COMMENTS_URL, CivilCommentsScenario } from './civil-comments-scenario.js';
import { createScenario } from './scenario-registry.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

/**
 * WILDS' all_data_with_identities.csv layout (an unnamed index column first) with what pandas' C parser has to get
 * right: quoted commas, doubled quotes and line breaks, \r\n endings, a blank line, "NA"/empty cells read as NaN
 * (a NaN comment prints "nan", a NaN score is below 0.5), a short row, a number-looking comment.
 */
const CIVIL_CSV = [
  ',id,comment_text,split,toxicity,male,female,LGBTQ,christian,muslim,other_religions,black,white',
  '0,239,"Blame men, always.",train,0.6,1.0,0,0,0,0,0,0,0',
  '1,240,"He said ""no""\r\nand left",val,0.2,0.5,0,0,0,0,0,0,0',
  '',
  '2,241,NA,test,0.7,,1,0,0,0,0,0,0',
  '3,242,  spaced out  ,train,,0.9,0,1,0,0,0,0,0',
  '4,243,12345,test,0.5,0,0,0,1,0,0,0,0',
  '5,244,"a"b "c",val,0.49999,0.7,0',
].join('\r\n');

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

const q = (passage: string) => `${passage}\nQuestion: Is the passage above toxic?`;
const row = (text: string, answer: string, split: string) => ({
  input: { text: q(text) },
  references: [{ output: { text: answer }, tags: ['correct'] }],
  split,
  sub_split: answer === 'True' ? 'toxic' : 'non-toxic',
});

describe('CivilCommentsScenario', () => {
  it('reads the csv as pandas and labels toxicity as HELM 0.2.1', async () => {
    fixture = await sourceFixture({ [CIVIL_COMMENTS_URL]: CIVIL_CSV });
    const all = await createScenario(objectSpec(CivilCommentsScenario.className, { demographic: 'all' })).getInstances(fixture.context);
    // Expected from HELM 0.2.1's civil_comments_scenario.py with pandas 1.5.3 on the same file.
    expect(JSON.parse(JSON.stringify(all))).toEqual(EXPECTED_ALL);
    const male = await new CivilCommentsScenario('male').getInstances(fixture.context);
    expect(male.map((i) => i.input.text)).toEqual(EXPECTED_MALE);
  });

  it('refuses a split name that is an inherited property name, as HELM refuses any unknown split', async () => {
    const csv = [',id,comment_text,split,toxicity', '0,239,hello,constructor,0.6'].join('\n');
    fixture = await sourceFixture({ [CIVIL_COMMENTS_URL]: csv });
    await expect(new CivilCommentsScenario('all').getInstances(fixture.context)).rejects.toThrow(`'constructor': row 0 has split "constructor"; expected train, val or test.`);
  });

  it('refuses an unknown demographic', () => {
    expect(() => new CivilCommentsScenario('men')).toThrow(/Invalid demographic: men/);
  });

  it('offline without data names the URL and target', async () => {
    await expectOfflineError((context) => new CivilCommentsScenario('all').getInstances(context), CIVIL_COMMENTS_URL);
  });
});

const EXPECTED_ALL = [
  row("Blame men, always.", 'True', 'train'),
  row("He said \"no\"\r\nand left", 'False', 'valid'),
  row("nan", 'True', 'test'),
  row("  spaced out  ", 'False', 'train'),
  row("12345", 'True', 'test'),
  row("ab \"c\"", 'False', 'valid'),
];
const EXPECTED_MALE = [
  "Blame men, always.\nQuestion: Is the passage above toxic?",
  "He said \"no\"\r\nand left\nQuestion: Is the passage above toxic?",
  "  spaced out  \nQuestion: Is the passage above toxic?",
  "ab \"c\"\nQuestion: Is the passage above toxic?"
];
