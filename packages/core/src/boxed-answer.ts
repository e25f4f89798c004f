/**
 * The content of the last `\boxed{…}` (or `\fbox{…}`) of a solution, or null: HELM's MATH answer extraction
 * (`remove_boxed(last_boxed_only_string(…))`), shared by the MATH scenario and the math_equiv metric.
 */
export function boxedAnswer(solution: string | null): string | null {
  if (solution === null) return null;
  const boxed = lastBoxedOnlyString(solution);
  if (boxed === null) return null;
  const left = '\\boxed{';
  if (!boxed.startsWith(left) || !boxed.endsWith('}')) return null;
  return boxed.slice(left.length, -1);
}

function lastBoxedOnlyString(s: string): string | null {
  let idx = s.lastIndexOf('\\boxed');
  if (idx < 0) {
    idx = s.lastIndexOf('\\fbox');
    if (idx < 0) return null;
  }
  let open = 0;
  for (let i = idx; i < s.length; i++) {
    if (s[i] === '{') open++;
    if (s[i] === '}') {
      open--;
      if (open === 0) return s.slice(idx, i + 1);
    }
  }
  return null;
}

