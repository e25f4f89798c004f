import { realpath } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { HelmError } from '@flexhelm/core';

/** True when `path` is `root` or below it (both already resolved). */
function isInside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

function refuse(parts: readonly string[], why: string): never {
  throw new HelmError(
    'ValueError',
    `the scenario file ${JSON.stringify(parts.join('/').slice(0, 200))} ${why}; scenario arguments that name files must be plain names (see the run spec's allowed values)`,
  );
}

/**
 * `join(root, ...parts)` for parts that come from scenario arguments: the resolved path must stay inside `root`
 * (no `..`, absolute part, or NUL byte can leave it), else a ValueError. Checks the text only; call
 * {@link realPathInside} before opening the file to also refuse symbolic links that lead out.
 */
export function joinInside(root: string, ...parts: string[]): string {
  if (parts.some((part) => part.includes('\0'))) refuse(parts, 'contains a NUL byte');
  // join() would keep an absolute part inside root, but such a part is never a name the scenario meant.
  if (parts.some((part) => isAbsolute(part))) refuse(parts, 'is an absolute path');
  const path = join(root, ...parts);
  if (!isInside(resolve(root), resolve(path))) refuse(parts, "leads outside the scenario's data folder");
  return path;
}

/**
 * The real path of `path` (which must exist), after checking that following symbolic links keeps it inside `root`'s
 * real path: a data folder whose files link elsewhere is refused before anything is read.
 */
export async function realPathInside(root: string, path: string): Promise<string> {
  const [realRoot, realFile] = await Promise.all([realpath(root), realpath(path)]);
  if (!isInside(realRoot, realFile)) refuse([relative(root, path)], "is a link that leads outside the scenario's data folder");
  return realFile;
}
