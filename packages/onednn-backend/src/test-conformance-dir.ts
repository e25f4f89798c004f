import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The golden data folder `../shared/conformance/<sub>` beside the checkout, as the conformance runner expects it, or
 * beside the folder holding it (a git worktree one level further down); '' when neither exists (tests skip).
 */
export function conformanceDir(sub: string): string {
  const candidates = [`../../../../shared/conformance/${sub}`, `../../../../../shared/conformance/${sub}`];
  return candidates.map((p) => fileURLToPath(new URL(p, import.meta.url))).find((p) => existsSync(p)) ?? '';
}
