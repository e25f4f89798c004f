import type { Command } from './command.js';

/** `flexhelm --help`: every command with its summary. */
export function programHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'usage: flexhelm <command> [options]',
    '',
    'commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'Run `flexhelm help <command>` (or `flexhelm <command> --help`) for the options of a command, `flexhelm --version`',
    'for the version.',
    'Exit status: 0 success, 2 bad usage or bad input (message on stderr), 1 internal failure.',
    '',
  ].join('\n');
}

/** `flexhelm <command> --help`: usage line, options, then the command's details. */
export function commandHelp(command: Command): string {
  const flags = Object.entries(command.options).map(([name, spec]) => {
    const o = command.repeatable?.includes(name) ? { ...spec, multiple: true } : spec;
    const value = o.type === 'string' ? ` ${o.valueName ?? 'VALUE'}` : '';
    return { left: `${o.short ? `-${o.short}, ` : '    '}--${name}${value}`, o };
  });
  const width = Math.max(...flags.map((f) => f.left.length), '    --help'.length);
  const lines = [
    `usage: flexhelm ${command.name} [options]${command.positionals ? ` ${command.positionals}` : ''}`,
    '',
    command.summary,
    '',
    'options:',
    ...flags.map(({ left, o }) => `  ${left.padEnd(width)}  ${o.description}${o.multiple ? ' (repeatable)' : ''}`),
    `  ${'-h, --help'.padEnd(width)}  show this help`,
  ];
  if (command.details) lines.push('', command.details.trimEnd());
  return `${lines.join('\n')}\n`;
}
