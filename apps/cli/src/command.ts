import type { UsageError } from './usage-error.js';

/** One option of a command, as `node:util` parseArgs takes it plus what `--help` shows. */
export interface OptionSpec {
  type: 'string' | 'boolean';
  short?: string;
  multiple?: boolean;
  /**
   * Values the option takes after it, as argparse's `nargs` (FlexLLMGen's `--percent 20 80 0 100 0 100`); they are
   * joined with spaces into one string value.
   */
  nargs?: number;
  /** Placeholder shown in help, e.g. `N` for `--max-eval-instances N`. */
  valueName?: string;
  description: string;
}

/** What a command gets to run with: parsed options and the streams it writes to. */
export interface CommandContext {
  options: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  usageError: (message: string) => UsageError;
}

/**
 * A `flexhelm <name>` command: one file under `commands/`, listed in `commands/index.ts`. `run` returns the exit
 * status (0 when it returns nothing); it throws `UsageError` / `HelmError` for input the user must fix.
 */
export interface Command {
  name: string;
  /** One line for the command list. */
  summary: string;
  /** Paragraphs shown by `flexhelm <name> --help` after the option list (formats, examples). */
  details?: string;
  options: Record<string, OptionSpec>;
  /** Options that this command takes several times although their spec (shared with another command) says once. */
  repeatable?: string[];
  /** Positional arguments, e.g. `[FILE...]`; commands without it reject positionals. */
  positionals?: string;
  /**
   * The command parses its own arguments (`serve`: the server's command line, defined once in apps/server): `run` gets
   * them all as `positionals`, unparsed, and answers `--help` itself.
   */
  ownArguments?: boolean;
  // biome-ignore lint/suspicious/noConfusingVoidType: a command returns an exit status or nothing at all
  run(ctx: CommandContext): Promise<number | void> | number | void;
}
