import { readFile } from 'node:fs/promises';

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Python's `open(path).read()` in text mode on a UTF-8 system: strict UTF-8 (a BOM is kept as U+FEFF) and universal
 * newlines (`\r\n` and lone `\r` become `\n`).
 */
export async function readPythonText(path: string): Promise<string> {
  const bytes = await readFile(path);
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch (error) {
    throw new Error(`${path} is not valid UTF-8 (${(error as Error).message}); the download may be damaged: delete it and run again.`);
  }
  return text.replace(/\r\n?/g, '\n');
}

/** Python's iteration over a text file: lines with their `\n`, the last one without when the file does not end in one. */
export function pythonLines(text: string): string[] {
  const lines = text.split(/(?<=\n)/);
  return lines.length === 1 && lines[0] === '' ? [] : lines;
}
