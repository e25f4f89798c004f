import type { Command } from '../command.js';
import { promptsCommand } from './prompts.js';
import { runSpecsCommand } from './run-specs.js';
import { instancesCommand } from './instances.js';
import { makeModelCommand } from './make-model.js';
import { generateCommand } from './generate.js';
import { exportOnnxCommand } from './export-onnx.js';
import { exportGgufCommand } from './export-gguf.js';
import { runCommand } from './run.js';
import { summarizeCommand } from './summarize.js';
import { workerCommand } from './worker.js';
import { queueCommand } from './queue.js';
import { profileCommand } from './profile.js';
import { serveResultsCommand } from './serve-results.js';
import { serveCommand } from './serve.js';

/** Every `flexhelm` command, in the order `flexhelm --help` lists them. Add new commands here. */
export const COMMANDS: readonly Command[] = [runCommand, summarizeCommand, runSpecsCommand, instancesCommand, promptsCommand, makeModelCommand, generateCommand, exportOnnxCommand, exportGgufCommand, workerCommand, queueCommand, profileCommand, serveCommand, serveResultsCommand];
