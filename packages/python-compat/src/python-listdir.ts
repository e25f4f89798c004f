import { opendir } from 'node:fs/promises';

/**
 * Python's `os.listdir(path)`: names in the order the file system returns them (not sorted — Node's `readdir` sorts,
 * `opendir` does not). HELM scenarios that iterate `os.listdir` (imdb) get their instance order from it.
 */
export async function pyListdir(path: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of await opendir(path)) names.push(entry.name);
  return names;
}
