import { pyFloat, pyJsonDumps, pyJsonParse, type PyJsonValue, toPlain } from '@flexhelm/python-compat';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { helmJson, instance, reference, type Instance, type ObjectSpec } from '@flexhelm/core';
import { ContractionPerturbation } from './contraction-perturbation.js';
import { createPerturbation } from './create-perturbation.js';
import { DataAugmenter } from './data-augmenter.js';
import { ExpansionPerturbation } from './expansion-perturbation.js';
import { FillerWordsPerturbation } from './filler-words-perturbation.js';
import { GenderPerturbation } from './gender-perturbation.js';
import { helmContractionMap, helmGenderMappings, helmKeyboardNeighbours, helmMisspellings, localHelmSourceDir } from './helm-word-lists.js';
import { MisspellingPerturbation } from './misspelling-perturbation.js';
import { TyposPerturbation } from './typos-perturbation.js';

/**
 * Tests that need HELM's own word lists. flexhelm does not ship them; they run when FLEXHELM_HELM_SOURCE_DIR points
 * at a HELM v0.2.1 checkout or `scripts/fetch-helm-data.mjs` has filled `helm-data/`; skipped otherwise, except in CI
 * (`CI` set), where `.ci/run` points FLEXHELM_HELM_SOURCE_DIR at `../shared/helm-v0.2.1` and a missing list fails.
 */
const helmSourceDir = localHelmSourceDir();
const data = { helmSourceDir, offline: true };
const GOLDEN = fileURLToPath(new URL('../../../../shared/conformance/helm/perturbations.json', import.meta.url));

function one(text: string, refs: string[] = []): Instance[] {
  return [instance({ id: 'id0', input: { text }, references: refs.map((r) => reference(r)) })];
}

describe.skipIf(!helmSourceDir && !process.env.CI)("HELM's perturbation unit tests (with HELM's word lists)", () => {
  it('reads the lists with their documented sizes', async () => {
    expect((await helmContractionMap(data)).size).toBe(77);
    expect((await helmMisspellings(data)).size).toBe(6523);
    expect((await helmGenderMappings(data)).terms).toHaveLength(32);
    expect((await helmKeyboardNeighbours(data)).size).toBe(26);
  });
  it('misspelling', async () => {
    const [, out] = new DataAugmenter([await MisspellingPerturbation.create(pyFloat(1), data)]).generate(one('Already, the new product is not available.'));
    expect(out!.input.text).toBe('Alreayd, hten new product is nto avaliable.');
    expect(out!.perturbation).toMatchObject({ name: 'misspellings' });
  });
  it('filler words', async () => {
    const p = await FillerWordsPerturbation.create({ insertProb: 0.3, speakerPh: false }, data);
    const [, out] = new DataAugmenter([p]).generate(one('The quick brown fox jumps over the lazy dog.'));
    expect(out!.input.text).toBe('The quick brown fox jumps over like the lazy probably dog.');
  });
  it('contraction and expansion', async () => {
    const [, c] = new DataAugmenter([await ContractionPerturbation.create(data)]).generate(one('She is a doctor, and I am a student', ['he is a teacher']));
    expect([c!.input.text, c!.references[0]!.output.text]).toEqual(["She's a doctor, and I'm a student", 'he is a teacher']);
    const [, e] = new DataAugmenter([await ExpansionPerturbation.create(data)]).generate(one("She's a doctor, and I'm a student", ["he's a teacher"]));
    expect([e!.input.text, e!.references[0]!.output.text]).toEqual(['She is a doctor, and I am a student', "he's a teacher"]);
  });
  it('typos', async () => {
    const [, out] = new DataAugmenter([await TyposPerturbation.create(0.1, data)]).generate(one('After their marriage, she started a close collaboration with Karvelas.'));
    expect(out!.input.text).toBe('After tjeir marriage, she xrwrted a cloae dollabpration with Iarvwlas.');
  });
  it('gender pronouns and terms', async () => {
    const pronouns = await GenderPerturbation.create({ mode: 'pronouns', prob: pyFloat(1), sourceClass: 'male', targetClass: 'female' }, data);
    const [, p] = new DataAugmenter([pronouns]).generate(one('Did she mention that he was coming with his parents and their friends?', ["She didn't, perhaps he didn't tell her!"]));
    expect([p!.input.text, p!.references[0]!.output.text]).toEqual(['Did she mention that she was coming with her parents and their friends?', "She didn't, perhaps she didn't tell her!"]);
    const terms = await GenderPerturbation.create({ mode: 'terms', prob: pyFloat(1), sourceClass: 'male', targetClass: 'female' }, data);
    const [, t] = new DataAugmenter([terms]).generate(one('His grandsons looked a lot like their dad.', ['How did their father look like?']));
    expect([t!.input.text, t!.references[0]!.output.text]).toEqual(['His granddaughters looked a lot like their mom.', 'How did their mother look like?']);
  });
});

describe.skipIf(!existsSync(GOLDEN) && !process.env.CI)('golden perturbations.json', () => {
  it('matches every output whose data is available', async () => {
    const golden = pyJsonParse(await readFile(GOLDEN, 'utf8')) as Map<string, PyJsonValue>;
    const get = (v: PyJsonValue | undefined, k: string) => (v as Map<string, PyJsonValue>).get(k);
    const byId = new Map((golden.get('instances') as PyJsonValue[]).map((v) => [get(v, 'id') as string, instance(toPlain(v) as Instance)]));
    let checked = 0;
    for (const entry of golden.get('perturbations') as PyJsonValue[]) {
      const spec = toPlain(get(entry, 'perturbation_spec')!) as ObjectSpec;
      const needsHelmLists = !/(ExtraSpace|Space|LowerCase|PersonName)Perturbation$/.test(spec.class_name);
      if ((needsHelmLists && !helmSourceDir) || get(entry, 'uses_our_data_file')) continue; // our-data-file cases: see the conformance checker
      const p = await createPerturbation({ class_name: spec.class_name, args: (get(get(entry, 'perturbation_spec'), 'args') as never) }, data);
      for (const output of get(entry, 'outputs') as PyJsonValue[]) {
        const seed = get(output, 'seed') as number | null;
        const out = p.apply(byId.get(get(output, 'instance_id') as string)!, seed ?? undefined);
        expect(out.input.text).toBe(get(output, 'output'));
        expect(out.references.map((r) => r.output.text)).toEqual(toPlain(get(output, 'references_out')!));
        expect(helmJson(out.perturbation)).toBe(pyJsonDumps(get(output, 'perturbation_description')!, 2));
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(60);
  });
});
