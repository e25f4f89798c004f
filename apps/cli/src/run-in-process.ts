import { Writable } from 'node:stream';
import type { Command } from './command.js';
import { runCli } from './run-cli.js';

/** A writable stream that keeps what is written, for running commands in-process (tests). */
class CapturedStream extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

/** Runs one command in this process with captured output: `{ status, stdout, stderr }`. */
export function runInProcess(command: Command, args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return runArgvInProcess([command.name, ...args], [command]);
}

/** Runs a whole `flexhelm` command line in this process (no Node start-up per call), over `commands` (default all). */
export async function runArgvInProcess(argv: string[], commands?: readonly Command[]): Promise<{ status: number; stdout: string; stderr: string }> {
  const stdout = new CapturedStream();
  const stderr = new CapturedStream();
  const status = await runCli(argv, { stdout, stderr }, commands);
  return { status, stdout: stdout.text, stderr: stderr.text };
}
