import { pyCapitalize, pyIsLowerChar, pyIsUpperChar } from '@flexhelm/python-compat';

/**
 * HELM's `match_case(source_word, target_word)`: `target` lower-cased if every character of `source` is lower
 * case, upper-cased if every one is upper case, capitalized if only the first is; otherwise unchanged. A character
 * that is neither (an apostrophe, a digit) makes both "every" tests fail, so `"I'm"` counts as capitalized.
 */
export function matchCase(source: string, target: string): string {
  const chars = Array.from(source);
  if (chars.every(pyIsLowerChar)) return target.toLowerCase();
  if (chars.every(pyIsUpperChar)) return target.toUpperCase();
  if (chars.length > 0 && pyIsUpperChar(chars[0]!)) return pyCapitalize(target);
  return target;
}
