import { closeMatches } from '@flexhelm/run-spec';

/**
 * `--max-ram -3` as `--max-ram=-3`: Node's parseArgs takes a value that starts with a dash for an option of its own
 * and says "argument is ambiguous"; no flexhelm option is a digit, so the number is the value and the command's own
 * check says what is wrong with it.
 */
export function joinNegativeValues(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    if (/^--[^=]+$/.test(arg) && next !== undefined && /^-\.?\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i += 1;
    } else out.push(arg);
  }
  return out;
}

/** "did you mean …?" for `word` among `names` (an empty string when nothing is close). */
export function didYouMean(word: string, names: Iterable<string>): string {
  const close = closeMatches(word, new Set(names), 3);
  return close.length ? ` (did you mean ${close.join(', ')}?)` : '';
}

/**
 * One line for an error of Node's parseArgs (an unknown option gets the closest of `optionNames`, e.g. `--port`), or
 * the error's own message for any other error.
 */
export function commandLineMessage(err: unknown, optionNames: readonly string[]): string {
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const option = /'([^']+)'/.exec(message)?.[1] ?? message;
    return `unknown option ${option}${option.startsWith('--') ? didYouMean(option, optionNames) : ''}`;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const option = /'(-[^' ]+)/.exec(message)?.[1];
    if (option && /argument missing/.test(message)) return `${option} needs a value`;
    if (option && /does not take an argument/.test(message)) return `${option} takes no value`;
    if (option && /ambiguous/.test(message)) return `${option} needs a value; to give one that starts with a dash, write ${option}=VALUE`;
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const word = /'([^']+)'/.exec(message)?.[1];
    if (word) return `unexpected argument '${word}' (this command takes options only)`;
  }
  // Node's own parse errors carry a second line of internals; flexhelm's messages (a policy's reasons) are kept whole.
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS') ? message.split('\n')[0]! : message;
}
