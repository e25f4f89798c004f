import { readFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { HelmError } from '@flexhelm/core';
import { DownloadError } from '@flexhelm/downloads';
import { ModelFileError } from '@flexhelm/engine';
import { RequestCacheError } from '@flexhelm/request-cache';
import { commandLineMessage, didYouMean, joinNegativeValues } from '@flexhelm/session';
import type { Command } from './command.js';
import { COMMANDS } from './commands/index.js';
import { commandHelp, programHelp } from './help-text.js';
import { InputError, UsageError } from './usage-error.js';

export interface CliStreams {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** File-system refusals that the user's folders cause (read-only, no permission, full, a file where a folder goes). */
const USER_FS_CODES = new Set(['EROFS', 'EACCES', 'EPERM', 'ENOSPC', 'EDQUOT', 'ENOTDIR', 'EISDIR']);

/** Errors from the user's input: a message is enough, no stack. */
function isInputError(err: unknown): err is Error {
  // A malformed config.json, shard index or weights file: the message names the file and what is wrong.
  if (err instanceof ModelFileError) return true;
  if (err instanceof UsageError || err instanceof InputError || err instanceof HelmError || err instanceof RequestCacheError || err instanceof DownloadError || (err as Error | null)?.name === 'DownloadError') return true;
  const fsError = err as NodeJS.ErrnoException | null;
  if (fsError instanceof Error && typeof fsError.path === 'string' && USER_FS_CODES.has(fsError.code ?? '')) return true;
  // parseArgs reports unknown options and missing values with these codes.
  const code = (err as { code?: string } | null)?.code;
  return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}

/** Joins the values of `nargs` options (`--percent 20 80 0 100 0 100`) into one argument each. */
function joinMultiValueOptions(command: Command, argv: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const spec = arg.startsWith('--') && !arg.includes('=') ? command.options[arg.slice(2)] : undefined;
    if (spec?.nargs && spec.nargs > 1 && argv[i + 1] === 'auto') {
      // `--percent auto`: one word instead of the numbers (the policy search picks them).
      out.push(arg, 'auto');
      i += 1;
    } else if (spec?.nargs && spec.nargs > 1) {
      const values = argv.slice(i + 1, i + 1 + spec.nargs);
      if (values.length < spec.nargs || values.some((v) => v.startsWith('--'))) {
        throw new UsageError(`${arg} takes ${spec.nargs} values (${spec.valueName ?? 'V'}), got ${values.filter((v) => !v.startsWith('--')).length}`);
      }
      out.push(arg, values.join(' '));
      i += spec.nargs;
    } else out.push(arg);
  }
  return out;
}

function parseCommandArgs(command: Command, argv: string[]) {
  const options: ParseArgsConfig['options'] = { help: { type: 'boolean', short: 'h' } };
  for (const [name, o] of Object.entries(command.options)) {
    options[name] = { type: o.type, ...(o.short ? { short: o.short } : {}), ...(o.multiple || command.repeatable?.includes(name) ? { multiple: true } : {}) };
  }
  try {
    const parsed = parseArgs({ args: joinNegativeValues(joinMultiValueOptions(command, argv)), options, strict: true, allowPositionals: command.positionals !== undefined, tokens: true });
    // A value given twice is a mistake to say, not one to settle silently by keeping the last.
    const seen = new Map<string, string>();
    for (const t of parsed.tokens) {
      if (t.kind !== 'option' || t.value === undefined || options[t.name]?.multiple) continue;
      const before = seen.get(t.name);
      if (before !== undefined) throw new UsageError(`--${t.name} is given twice ('${before}' and '${t.value}'); give it once`);
      seen.set(t.name, t.value);
    }
    return parsed;
  } catch (err) {
    // Node's words name its own API; ours name the option and the closest one this command has.
    if (!(err instanceof UsageError) && (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS_')) throw new UsageError(commandLineMessage(err, Object.keys(options).map((o) => `--${o}`)));
    throw err;
  }
}

/** This flexhelm's version, from the CLI package's own package.json (next to dist/). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
  return `flexhelm ${pkg.version} (Node ${process.versions.node})\n`;
}

/** `flexhelm help [command]` and `flexhelm <command> --help`. */
async function showHelp(command: Command, streams: CliStreams): Promise<number> {
  if (!command.ownArguments) {
    streams.stdout.write(commandHelp(command));
    return 0;
  }
  return (await command.run({ options: {}, positionals: ['--help'], ...streams, usageError: (m) => new UsageError(m) })) ?? 0;
}

function unknownCommand(name: string, commands: readonly Command[], stderr: NodeJS.WritableStream): number {
  stderr.write(`flexhelm: unknown command '${name}'${didYouMean(name, commands.map((c) => c.name))}; run \`flexhelm --help\` for the list\n`);
  return 2;
}

/** Runs `flexhelm <argv>`; returns the exit status (0 ok, 2 bad usage or input, 1 internal failure). */
export async function runCli(argv: string[], streams: CliStreams, commands: readonly Command[] = COMMANDS): Promise<number> {
  const { stdout, stderr } = streams;
  const [name, ...rest] = argv;
  if (name === '--version' || name === '-V' || name === 'version') {
    stdout.write(version());
    return 0;
  }
  if (name === 'help' && rest.length > 0) {
    const about = commands.find((c) => c.name === rest[0]);
    return about ? showHelp(about, streams) : unknownCommand(rest[0]!, commands, stderr);
  }
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    (name === undefined ? stderr : stdout).write(programHelp(commands));
    return name === undefined ? 2 : 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    if (name.startsWith('-')) {
      stderr.write(`flexhelm: '${name}' goes after a command (flexhelm <command> ${name}); run \`flexhelm --help\` for the commands\n`);
      return 2;
    }
    return unknownCommand(name, commands, stderr);
  }
  try {
    if (command.ownArguments) return (await command.run({ options: {}, positionals: rest, stdout, stderr, usageError: (m) => new UsageError(m) })) ?? 0;
    const parsed = parseCommandArgs(command, rest);
    if (parsed.values.help) return await showHelp(command, streams);
    const status = await command.run({
      options: parsed.values,
      positionals: parsed.positionals,
      stdout,
      stderr,
      usageError: (message) => new UsageError(message),
    });
    return status ?? 0;
  } catch (err) {
    if (isInputError(err)) {
      // A library's message may start with its function's name (`makeModel: …`): the user never called it.
      stderr.write(`flexhelm ${command.name}: ${err.message.replace(/^[a-z]+[A-Z]\w*: /, '')}\n`);
      if (err instanceof UsageError) {
        stderr.write(`run \`flexhelm ${command.name} --help\` for usage\n`);
      }
      return 2;
    }
    stderr.write(`flexhelm ${command.name}: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 1;
  }
}
