// Test helper (not built): a `flexhelm` process whose output a test can wait for.
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/main.js', import.meta.url));

export interface CliProcess {
  child: ChildProcess;
  /** stdout and stderr so far, interleaved as they arrived. */
  output: () => string;
  exited: Promise<{ status: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves once the output matches `pattern`; rejects with the output after `timeoutMs`. */
  waitFor: (pattern: RegExp, timeoutMs?: number) => Promise<RegExpMatchArray>;
}

/** Starts `flexhelm <args>` (the built CLI) with `env` added to this process's environment. */
export function startCli(args: string[], env: NodeJS.ProcessEnv = {}): CliProcess {
  const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let text = '';
  const waiters: (() => void)[] = [];
  const onData = (c: Buffer) => {
    text += c.toString();
    for (const w of waiters.splice(0)) w();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<{ status: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (status, signal) => resolve({ status, signal })));
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${text}`)), timeoutMs);
      const check = () => {
        const m = text.match(pattern);
        if (m) {
          clearTimeout(timer);
          resolve(m);
        } else waiters.push(check);
      };
      check();
    });
  return { child, output: () => text, exited, waitFor };
}
