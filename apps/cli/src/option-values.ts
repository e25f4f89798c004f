import { existsSync, statSync } from 'node:fs';
import { InputError, UsageError } from './usage-error.js';

/** An integer option value (`--priority 2`), or undefined when the option is absent. */
export function integerOption(value: unknown, flag: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const text = String(value).trim();
  if (!/^[+-]?\d+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`--${flag} must be an integer ≥ ${min}, got '${String(value)}'`);
  }
  return Number(text);
}

/** A repeatable list option; each value may also hold several comma-separated items (`--models-to-run a,b`). */
export function listOption(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  const items = (value as string[]).flatMap((v) => v.split(',')).map((v) => v.trim()).filter((v) => v.length > 0);
  return items;
}

/** The description of `--path`, the same in every command that takes a model: an alias of `--model DIR`. */
export const PATH_ALIAS_DESCRIPTION = 'the same as --model DIR (FlexLLMGen\'s flag; with --model NAME as well: the folder that holds NAME\'s weights)';

/**
 * The model folder of a command that needs one on disk: `--model DIR`, or `--path DIR` (its alias); a missing folder is
 * "no such folder", one line.
 */
export function modelFolderOption(options: Record<string, unknown>, usage: string): string {
  const model = options.model as string | undefined;
  const path = options.path as string | undefined;
  if (model !== undefined && path !== undefined && model !== path) throw new UsageError(`give the model folder once: --model DIR (or its alias --path DIR), not both`);
  const folder = model ?? path;
  if (folder === undefined) throw new UsageError(usage);
  const flag = model !== undefined ? '--model' : '--path';
  if (!existsSync(folder)) throw new InputError(`${flag} ${folder}: no such folder`);
  if (!statSync(folder).isDirectory()) throw new InputError(`${flag} ${folder} is a file; give the folder that holds config.json and the weights`);
  return folder;
}
