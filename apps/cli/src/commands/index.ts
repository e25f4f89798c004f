import type { Command } from '../command.js';
import { promptsCommand } from './prompts.js';
import { runSpecsCommand } from './run-specs.js';
import { instancesCommand } from './instances.js';

/** Every `flexhelm` command, in the order `flexhelm --help` lists them. Add new commands here. */
export const COMMANDS: readonly Command[] = [runSpecsCommand, instancesCommand, promptsCommand];
