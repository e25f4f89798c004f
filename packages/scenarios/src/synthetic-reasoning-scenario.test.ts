import { describe, expect, it } from 'vitest';
import { HelmError, type Instance } from '@flexhelm/core';
import { SyntheticReasoningScenario, type SyntheticReasoningMode } from './synthetic-reasoning-scenario.js';
import { instanceDigest } from './test-instance-digest.js';

// Each mode and seed is generated once for all tests (11000 instances each).
const cache = new Map<string, Instance[]>();
function generated(mode: SyntheticReasoningMode, seed = 42): Instance[] {
  const key = `${mode}/${seed}`;
  if (!cache.has(key)) cache.set(key, new SyntheticReasoningScenario(mode, seed).generate());
  return cache.get(key)!;
}

// Digests of HELM 0.2.1's own output for each mode and seed (see test-instance-digest.ts).
const HELM_DIGESTS: [string, number, string][] = [
  ['variable_substitution', 42, '684d291c5e1220e4edbfac94b7f594aead2d36ae3ea59952a2cefa90f2f1a07d'],
  ['pattern_match', 42, '544c9bb99cbecbb7494e9c48b2b10805a337eadebef5dae01d817f86f839f469'],
  ['pattern_match', 1, 'f63ff7b5a191f8cf5c5901d675919a282d9077b3d3b6bd4fc099350381f1ce87'],
  ['induction', 42, 'c0993b82f250e62d187043cfb640959f5b2c10acf1a7b3d4c9ff02e5dd05a671'],
];

describe('SyntheticReasoningScenario', () => {
  it.each(HELM_DIGESTS)('mode=%s random_seed=%i reproduces HELM instance for instance', (mode, seed, digest) => {
    const instances = generated(mode as SyntheticReasoningMode, seed);
    expect(instances).toHaveLength(11000);
    expect(instanceDigest(instances)).toBe(digest);
  });

  it('matches the HELM examples in the spec (pattern_match #0, #1, #1000, #10999)', async () => {
    const instances = generated('pattern_match');
    expect(await new SyntheticReasoningScenario('pattern_match').getInstances()).toEqual(instances);
    const show = (i: number) => [instances[i]!.input.text, instances[i]!.references[0]!.output.text, instances[i]!.split];
    expect(show(0)).toEqual(['Rules: + = X Z | X = Z + | + Z = X | X = Z + | Result: + blueberry = horse', '+ Z = X', 'train']);
    expect(show(1)).toEqual(['Rules: Z = = = | Z Z = = = | = = Z = | = = = Z | Result: stork shark stork shark = = =', 'Z Z = = =', 'train']);
    expect(show(1000)).toEqual(['Rules: + Z = = X | Z + X = = | Z X + = = | + X = Z = | Result: zebra + pear = =', 'Z + X = =', 'valid']);
    expect(show(10999)).toEqual(['Rules: X + - - Y | + Y - X - | Y Y - X + - | - X Y + - | Result: lion lion - peach + -', 'Y Y - X + -', 'test']);
    expect(instances[0]!.references[0]!.tags).toEqual(['correct']);
  });

  it('renders variable_substitution and induction #0 as HELM does', () => {
    const vs = generated('variable_substitution')[0];
    expect(vs!.input.text).toBe('Rules: + Z = X | Substitutions: X by " horse " , Z by " blueberry "');
    expect(vs!.references[0]!.output.text).toBe('+ blueberry = horse');
    const ind = generated('induction')[0];
    expect(ind!.input.text).toBe('Two results: + blueberry = horse | + blueberry cobra = whale stork');
    expect(ind!.references[0]!.output.text).toBe('Rule: + Z = X');
  });

  it('splits 1000 train, 5000 valid, 5000 test', () => {
    const splits = generated('induction').map((i) => i.split);
    expect(splits.filter((s) => s === 'train')).toHaveLength(1000);
    expect(splits.filter((s) => s === 'valid')).toHaveLength(5000);
    expect(splits.slice(6000).every((s) => s === 'test')).toBe(true);
  });

  it('rejects an unknown mode the way HELM does (AssertionError) and says which modes exist', () => {
    const make = () => new SyntheticReasoningScenario('pattern_matching' as 'induction');
    expect(make).toThrow(HelmError);
    expect(make).toThrow(/Unsupported mode: pattern_matching.*mode=pattern_match/);
  });
});
