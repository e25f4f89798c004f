import { objectSpec } from '@flexhelm/core';
import { afterEach, describe, expect, it } from 'vitest';
import { createScenario } from './scenario-registry.js';
import { SUMMARIZATION_DATASETS, SummarizationScenario, cleanAndTruncate } from './summarization-scenario.js';
import { expectOfflineError, type SourceFixture, sourceFixture } from './test-sources.js';

// pickle.dumps(dataset, protocol=4) of small XSum- and CNN/DM-shaped datasets (made with Python 3.11), and what HELM
// 0.2.1's SummarizationScenario builds from them as [article, summary, split].
const XSUM_PICKLE =
  'gASV/AMAAAAAAAB9lCiMBXRyYWlulF2UKH2UKIwIZG9jdW1lbnSUjOl3MCB3MSB3MiB3MyB3NCB3NSB3NiB3NyB3OCB3OSB3MTAgdzExIHcxMiB3MTMgdzE0IHcxNSB3MTYgdzE3IHcxOCB3MTkgdzIwIHcyMSB3MjIgdzIzIHcyNCB3MjUgdzI2IHcyNyB3MjggdzI5IHczMCB3MzEgdzMyIHczMyB3MzQgdzM1IHczNiB3MzcgdzM4IHczOSB3NDAgdzQxIHc0MiB3NDMgdzQ0IHc0NSB3NDYgdzQ3IHc0OCB3NDkgdzUwIHc1MSB3NTIgdzUzIHc1NCB3NTUgdzU2IHc1NyB3NTggdzU5CmVuZJSMB3N1bW1hcnmUjDdvbmUgdHdvIHRocmVlIGZvdXIgZml2ZSBzaXggc2V2ZW4gZWlnaHQgbmluZSB0ZW4gZWxldmVulHV9lChoBIwUc2hvcnTCoGFydGljbGUgIGhlcmWUaAZoB3V9lChoBIz7dzAgdzEgdzIgdzMgdzQgdzUgdzYgdzcgdzggdzkgdzEwIHcxMSB3MTIgdzEzIHcxNCB3MTUgdzE2IHcxNyB3MTggdzE5IHcyMCB3MjEgdzIyIHcyMyB3MjQgdzI1IHcyNiB3MjcgdzI4IHcyOSB3MzAgdzMxIHczMiB3MzMgdzM0IHczNSB3MzYgdzM3IHczOCB3MzkgdzQwIHc0MSB3NDIgdzQzIHc0NCB3NDUgdzQ2IHc0NyB3NDggdzQ5IHc1MCB3NTEgdzUyIHc1MyB3NTQgdzU1IHc1NiB3NTcgdzU4IHc1OSBMYXN0IHVwZGF0ZWQgYXQgMTA6MDCUaAZoB3V9lChoBIzldzAgdzEgdzIgdzMgdzQgdzUgdzYgdzcgdzggdzkgdzEwIHcxMSB3MTIgdzEzIHcxNCB3MTUgdzE2IHcxNyB3MTggdzE5IHcyMCB3MjEgdzIyIHcyMyB3MjQgdzI1IHcyNiB3MjcgdzI4IHcyOSB3MzAgdzMxIHczMiB3MzMgdzM0IHczNSB3MzYgdzM3IHczOCB3MzkgdzQwIHc0MSB3NDIgdzQzIHc0NCB3NDUgdzQ2IHc0NyB3NDggdzQ5IHc1MCB3NTEgdzUyIHc1MyB3NTQgdzU1IHc1NiB3NTcgdzU4IHc1OZRoBowRdG9vIHNob3J0IHN1bW1hcnmUdWWMCnZhbGlkYXRpb26UXZR9lChoBIwUICBWYWxpZAlkb2MgCgogdGV4dByUaAaMBnYgc3VtCpR1YYwEdGVzdJRdlH2UKGgEjC5NZWRpYSBwbGF5YmFjayBpcyB1bnN1cHBvcnRlZCBvbiB5b3VyIGRldmljZSB0lGgGjAF0lHVhdS4=';
const XSUM_EXPECTED = [
  [`${Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ')} end`, 'one two three four five six seven eight nine ten eleven', 'train'],
  ['Valid doc text', 'v sum', 'valid'],
  ['Media playback is unsupported on your device t', 't', 'test'],
];
const CNNDM_PICKLE =
  'gASV0wAAAAAAAAB9lCiMBXRyYWlulF2UKH2UKIwHYXJ0aWNsZZSMC2EgYiBjIGQgZSBmlIwKaGlnaGxpZ2h0c5SMBWgxCmgylHV9lChoBIwDYSBilGgGjAF4lHV9lChoBIwneiB6IHogeiB6IHogeiB6IHogeiB6IHogeiB6IHogeiB6IHogeiB6lGgGjAF5lHVljAp2YWxpZGF0aW9ulF2UjAR0ZXN0lF2UfZQoaASMIW9uZSB0d28gdGhyZWUgZm91ciBmaXZlIHNpeCBzZXZlbpRoBowBdJR1YXUu';
// with sampling_min_length=3, sampling_max_length=10, doc_max_length=5
const CNNDM_EXPECTED = [
  ['a b c d e', 'h1 h2', 'train'],
  ['z z z z z', 'y', 'train'],
  ['one two three four five', 't', 'test'],
];

const summary = (instances: { input: { text: string }; references: { output: { text: string }; tags: string[] }[]; split?: string }[]) =>
  instances.map((i) => {
    expect(i.references).toHaveLength(1);
    expect(i.references[0]!.tags).toEqual(['correct']);
    return [i.input.text, i.references[0]!.output.text, i.split];
  });

let fixture: SourceFixture | undefined;
afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

describe('SummarizationScenario', () => {
  it('xsum: cleans whitespace and applies the XSum train filter', async () => {
    fixture = await sourceFixture({ [SUMMARIZATION_DATASETS.xsum!.url]: Buffer.from(XSUM_PICKLE, 'base64') });
    const scenario = createScenario(objectSpec(SummarizationScenario.className, { dataset_name: 'xsum' }));
    expect(summary(await scenario.getInstances(fixture.context))).toEqual(XSUM_EXPECTED);
  });

  it('cnn-dm: article/highlights keys, length filters on train and doc_max_length everywhere', async () => {
    fixture = await sourceFixture({ [SUMMARIZATION_DATASETS['cnn-dm']!.url]: Buffer.from(CNNDM_PICKLE, 'base64') });
    const scenario = createScenario(
      objectSpec(SummarizationScenario.className, { dataset_name: 'cnn-dm', sampling_min_length: 3, sampling_max_length: 10, doc_max_length: 5 }),
    );
    expect(summary(await scenario.getInstances(fixture.context))).toEqual(CNNDM_EXPECTED);
  });

  it('rejects unknown datasets as HELM does, and is offline-safe', async () => {
    expect(() => new SummarizationScenario('xsum_sampled')).toThrow(/Uknown dataset_name: xsum_sampled/);
    await expectOfflineError((context) => new SummarizationScenario('xsum-sampled').getInstances(context), SUMMARIZATION_DATASETS['xsum-sampled']!.url);
  });

  it('cleanAndTruncate follows Python slicing', () => {
    expect(cleanAndTruncate(' a\nb  c ')).toBe('a b c');
    expect(cleanAndTruncate('a b c', 0)).toBe('');
    expect(cleanAndTruncate('a b c', -1)).toBe('a b');
  });
});
