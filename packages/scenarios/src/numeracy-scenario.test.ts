import { PythonRandom } from '@flexhelm/python-compat';
import { describe, expect, it } from 'vitest';
import { HelmError } from '@flexhelm/core';
import { NumeracyScenario, generatePolynomial, selectRanges } from './numeracy-scenario.js';
import { instanceDigest } from './test-instance-digest.js';

// HELM 0.2.1 digests per relation type, mode, overlap, sort_vals and seed (see test-instance-digest.ts).
const HELM_DIGESTS: Record<string, string> = {
  'linear,standard,true,false,0': '66e80fa49ea0d36c8f7801f70bda2f95237ae4e7104f2a73b99bc7bdbc13cedb',
  'linear,standard,true,false,7': '6582df57e0557a57e8b44f116bee48a618705322f0c793c0192bcd6b7b812e0c',
  'linear,standard,true,true,0': 'e6d7ab81a442fd35dbb5f9fcce38802e98b26c81e35cdb9ff100b063459b2eb3',
  'linear,standard,false,false,0': '3118594c086f549e32d22bb6db6512cacb5aafea3966d280e4d4fb9d8ad0484c',
  'linear,standard,false,true,7': '75fa16e6212fae13f535e46632b4b8291ef15146d10f5d3fdd8d72587654fe83',
  'linear,example,true,false,0': 'c3fa530f08dda042e0ebdf8066a76af376980f320396f610a30ce0811abcd700',
  'linear,example,false,false,7': '499df4cb4d304943458f3f92a8b11e03580bf5f45713d7b92054923e53446d8d',
  'parabola,standard,true,false,0': 'd8ff6cc97a5e408691d055cc89661186fe0aa8f9db76c5b7b1969c3a38c4aa08',
  'parabola,standard,true,true,7': '0016f406f31c0faa10a50cde920b99995801d218816098191bdf92f8249f5617',
  'parabola,standard,false,false,0': '5daee84583db083d9e0def3b76835028962558a7c8a21cebf8838cb3856e8f02',
  'parabola,standard,false,true,0': '7f00c64b78fc9b94ed7360c2a984b287fb6fa2c60ee0c43917bedb923929e875',
  'parabola,example,true,false,0': '80d3f8b51cb1df1c718f64b5ca22b35150c57cce433aaef5e582c082d175fb37',
  'parabola,example,false,false,7': 'c4a8b67fd494e7e6413e2444907fa4746fb65df08b5af806f31a6b1e8f5ce4c9',
  'plane,standard,true,false,0': '111ff17b3a3170883b7aed4595b3f422ce0089a6ff75b31a1ee8c2a3fac8978c',
  'plane,standard,true,false,7': '9c75e5561aa577403a87d60f5493fca2bc2fbd49e1047014f4f175e64a1beb2a',
  'plane,standard,true,true,0': '06f7cb812fcaac511b6c07742a4530b4b99156d733879d16fb9fdad99e06c830',
  'plane,example,true,false,0': '75ad4d630eb5ad621e4141d2b6a04e65ce26dc193a2390275b2f8c00dd327ea7',
  'plane,example,true,true,7': '1cffc89eec416046ae5416088a2716d9d3278df145d6eaaec206080a1c40c736',
  'paraboloid,standard,true,false,0': 'bd7c3fef25ce667f05b2458062100d15d9c60f024985c7ae9951d04480473b43',
  'paraboloid,standard,true,false,7': 'c2f80179b68abdf980ee9b68f831fbaa50dc3efb9f57a0f3c906da95234424cd',
  'paraboloid,standard,true,true,7': '1f9f14ec63be70102e93c6627839646b2693309a41d72b7053667c4ae6102efc',
  'paraboloid,example,true,false,0': '027e064ed7154c46287b43884cb75a79cd6f0286857648ab106493a972a2fcf0',
  'paraboloid,example,true,true,0': 'd3ecd15e227227dd1f7e354336bbe1fc3690d4a37811cfcecf66d636b3bf7fe3',
};

describe('NumeracyScenario', () => {
  it.each(Object.entries(HELM_DIGESTS))('%s (relation, mode, overlap, sort_vals, seed) reproduces HELM', (key, digest) => {
    const [relationType, mode, overlap, sortVals, seed] = key.split(',');
    const instances = new NumeracyScenario({ relationType, mode, overlap: overlap === 'true', sortVals: sortVals === 'true', seed: Number(seed) }).generate();
    expect(instances).toHaveLength(200);
    expect(instanceDigest(instances)).toBe(digest);
  });

  it.each([
    ['linear', 'standard', '-82', '-324', 'y = 4x + 4'],
    ['linear', 'example', '-82', '-159', 'y = 2x + 5'],
    ['parabola', 'standard', '18', '667', 'y = 2x^2 + x + 1'],
    ['parabola', 'example', '18', '326', 'y = x^2 + 2'],
    ['plane', 'standard', '6, 8', '57', 'z = 4x + 4y + 1'],
    ['plane', 'example', '6, 8', '25', 'z = 2x + y + 5'],
    ['paraboloid', 'standard', '16, 18', '1128', 'z = 2x^2 + xy + y^2 + 4'],
    ['paraboloid', 'example', '16, 18', '838', 'z = 2x^2 + y^2 + 2'],
  ])('%s/%s seed 0: first instance %s → %s with solution %s', (relationType, mode, input, output, solution) => {
    const [first] = new NumeracyScenario({ relationType, mode, seed: 0 }).generate();
    expect(first!.input.text).toBe(input);
    expect(first!.references).toEqual([
      { output: { text: output }, tags: ['correct'] },
      { output: { text: solution }, tags: ['solution'] },
      { output: { text: relationType }, tags: ['class'] },
    ]);
    expect(first!.split).toBe('train');
  });

  it('mode=function yields no instances, as in HELM 0.2.1', () => {
    expect(new NumeracyScenario({ mode: 'function', seed: 0 }).generate()).toEqual([]);
  });

  it('two-variable relations without overlap fail like numpy does, with a hint', () => {
    expect(() => new NumeracyScenario({ relationType: 'plane', mode: 'standard', seed: 0, overlap: false }).generate()).toThrow(
      /Cannot take a larger sample than population.*overlap=True/,
    );
  });

  it('needs a seed and a known relation type and mode', () => {
    expect(() => new NumeracyScenario({ mode: 'standard' }).generate()).toThrow(/needs a seed/);
    expect(() => new NumeracyScenario({ relationType: 'cubic' })).toThrow(/linear, parabola, plane, paraboloid/);
    expect(() => new NumeracyScenario({ mode: 'fancy' })).toThrow(HelmError);
  });

  it('selectRanges picks the boxes HELM documents', () => {
    expect(selectRanges(100, 100, 1, true, false)).toEqual([[[-100, 100]], [[-100, 100]]]);
    expect(selectRanges(100, 100, 1, true, true)).toEqual([[[0, 200]], [[0, 200]]]);
    expect(selectRanges(100, 100, 2, true, false)[0]).toEqual([[-10, 10], [-10, 10]]);
    expect(selectRanges(100, 100, 2, true, true)[0]).toEqual([[0, 20], [0, 20]]);
    expect(selectRanges(100, 100, 1, false, false)).toEqual([[[-100, 100]], [[-50, 50]]]);
  });

  it('generatePolynomial gives up after 100 draws with HELM’s message', () => {
    expect(() => generatePolynomial(new PythonRandom(0), 1, 1, [[0, 0], [0, 0]])).toThrow(
      'Failed to sample valid polynomial equation within 100 attempts from ranges [(0, 0), (0, 0)].',
    );
  });
});
