import { pyFloat, pyParseBigInt, type PyNumber } from '@flexhelm/python-compat';
import { boxedAnswer } from '@flexhelm/core';

/**
 * HELM's `is_equiv` for MATH answers (from Hendrycks et al.'s MATH code): both answers are normalised — line
 * breaks, `\!`, `\left`/`\right`, degrees, dollars, units after `\text{ `, percent signs, leading zeros, a short
 * `x =` prefix, `\sqrt3`, spaces, `\frac12`, `0.5`, `a/b` — and compared. Any failure while normalising falls back
 * to comparing the raw strings, as the Python `try/except` does.
 */
export function mathEquiv(str1: string | null, str2: string | null): PyNumber {
  if (str1 === null && str2 === null) return pyFloat(1);
  if (str1 === null || str2 === null) return pyFloat(0);
  try {
    return pyFloat(stripMathString(str1) === stripMathString(str2) ? 1 : 0);
  } catch {
    return pyFloat(str1 === str2 ? 1 : 0);
  }
}

/** `is_equiv_chain_of_thought`: compare the last `\boxed{…}` answers of two solutions. */
export function mathEquivChainOfThought(str1: string, str2: string): PyNumber {
  return mathEquiv(boxedAnswer(str1), boxedAnswer(str2));
}

/** Thrown where the Python code would raise (an assertion or an index error), so `mathEquiv` falls back. */
class NormalizationFailed extends Error {}

function fixFracs(s: string): string {
  const parts = s.split('\\frac');
  let out = parts[0]!; // split gives at least one part
  for (const part of parts.slice(1)) {
    out += '\\frac';
    if (part === '') throw new NormalizationFailed('empty \\frac argument'); // Python: substr[0] IndexError
    if (part[0] === '{') {
      out += part;
      continue;
    }
    if (part.length < 2) return s;
    const a = part[0];
    const b = part[1];
    const rest = part.slice(2);
    out += b !== '{' ? `{${a}}{${b}}${rest}` : `{${a}}${b}${rest}`;
  }
  return out;
}

function fixASlashB(s: string): string {
  const parts = s.split('/');
  if (parts.length !== 2) return s;
  const a = pyParseBigInt(parts[0]!);
  const b = pyParseBigInt(parts[1]!);
  if (a === undefined || b === undefined || s !== `${a}/${b}`) return s;
  return `\\frac{${a}}{${b}}`;
}

function removeRightUnits(s: string): string {
  if (!s.includes('\\text{ ')) return s;
  const parts = s.split('\\text{ ');
  if (parts.length !== 2) throw new NormalizationFailed('more than one \\text{ unit');
  return parts[0]!;
}

function fixSqrt(s: string): string {
  if (!s.includes('\\sqrt')) return s;
  const parts = s.split('\\sqrt');
  let out = parts[0]!; // split gives at least one part
  for (const part of parts.slice(1)) {
    if (part === '') throw new NormalizationFailed('empty \\sqrt argument'); // Python: split[0] IndexError
    out += part[0] !== '{' ? `\\sqrt{${part[0]}}${part.slice(1)}` : `\\sqrt${part}`;
  }
  return out;
}

/** Hendrycks' `_strip_string`. */
export function stripMathString(input: string): string {
  let s = input.replaceAll('\n', '');
  s = s.replaceAll('\\!', '');
  s = s.replaceAll('\\\\', '\\');
  s = s.replaceAll('tfrac', 'frac').replaceAll('dfrac', 'frac');
  s = s.replaceAll('\\left', '').replaceAll('\\right', '');
  s = s.replaceAll('^{\\circ}', '').replaceAll('^\\circ', '');
  s = s.replaceAll('\\$', '');
  s = removeRightUnits(s);
  s = s.replaceAll('\\%', '');
  s = s.replaceAll(' .', ' 0.').replaceAll('{.', '{0.');
  if (s.length === 0) return s;
  if (s[0] === '.') s = `0${s}`;
  const eq = s.split('=');
  if (eq.length === 2 && [...eq[0]!].length <= 2) s = eq[1]!;
  s = fixSqrt(s);
  s = s.replaceAll(' ', '');
  s = fixFracs(s);
  if (s === '0.5') s = '\\frac{1}{2}';
  s = fixASlashB(s);
  return s;
}

export { boxedAnswer };
