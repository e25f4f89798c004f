import { pythonLines, readPythonText } from '@flexhelm/python-compat';
import { HelmError } from '@flexhelm/core';

/** Python's `[json.loads(line) for line in open(path)]`: every line must be JSON (a blank line is an error, as in Python). */
export async function readJsonLines(path: string): Promise<unknown[]> {
  return pythonLines(await readPythonText(path)).map((line, i) => parseJson(line, `line ${i + 1} of ${path}`));
}

/** Python's `json.load(open(path))`. */
export async function readJsonFile(path: string): Promise<unknown> {
  return parseJson(await readPythonText(path), path);
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new HelmError('ValueError', `${where} is not valid JSON (${(error as Error).message}); delete the file to download it again.`);
  }
}

/** `obj[key]` on a parsed JSON object, with Python's KeyError when it is missing. */
export function jsonField(obj: unknown, key: string, where: string): unknown {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj) || !Object.hasOwn(obj, key)) {
    throw new HelmError('KeyError', `'${key}': ${where} has no field "${key}".`);
  }
  return (obj as Record<string, unknown>)[key];
}

/** `obj[key]` that must be a string. */
export function jsonString(obj: unknown, key: string, where: string): string {
  const value = jsonField(obj, key, where);
  if (typeof value !== 'string') throw new HelmError('TypeError', `${where}: field "${key}" should be a string, got ${JSON.stringify(value)}.`);
  return value;
}
