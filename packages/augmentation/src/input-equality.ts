import type { Input } from '@flexhelm/core';

/**
 * The Python class of an Input: `'PassageQuestionInput'` when the scenario built it that way (marked by a `kind`
 * property, which should be non-enumerable so it is never written), else `'Input'`.
 */
export function inputClassName(input: Input): string {
  const kind = (input as { kind?: unknown }).kind;
  return typeof kind === 'string' ? kind : 'Input';
}

/**
 * Python's `==` on two frozen-dataclass Inputs: same class and same text. A perturbation always produces a plain
 * `Input`, so a perturbed PassageQuestionInput never equals its original (HELM keeps such "unchanged" copies).
 */
export function inputsEqual(a: Input, b: Input): boolean {
  if (a === b) return true;
  return inputClassName(a) === inputClassName(b) && a.text === b.text;
}
