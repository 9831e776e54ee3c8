import { loaded, optionLabel, usageLine, type Command } from './command-line.js';

const cell = (s: string) => s.replace(/\|/g, '\\|');

function section(cmd: Command, path: string, depth: number): string {
  const { spec } = cmd;
  const parts = [
    `${'#'.repeat(depth)} \`${path}\``,
    `${spec.summary.replace(/^./, (c) => c.toUpperCase())}.`.replace(/\.\.$/, '.'),
    `Usage: \`${usageLine(path, cmd)}\``,
  ];
  if (spec.options.length > 0)
    parts.push(
      [
        '| Option | Meaning |',
        '| --- | --- |',
        ...spec.options.map((o) => `| \`${cell(optionLabel(o))}\` | ${cell(o.help)} |`),
      ].join('\n'),
    );
  if (spec.details) parts.push(`\`\`\`text\n${spec.details.trimEnd()}\n\`\`\``);
  return parts.join('\n\n');
}

/**
 * The generated part of docs/reference/cli.md: every command and key action
 * with its arguments and options, from the same declarations that parse the
 * command line and print --help. Give it `await loadAll(program)`.
 */
export function renderReference(program: Command): string {
  const out: string[] = [section(program, program.spec.name, 2)];
  const walk = (cmd: Command, path: string, depth: number) => {
    for (const sub of (cmd.subcommands ?? []).map(loaded)) {
      const subPath = `${path} ${sub.spec.name}`;
      out.push(section(sub, subPath, depth));
      walk(sub, subPath, depth + 1);
    }
  };
  walk(program, program.spec.name, 2);
  return `${out.join('\n\n')}\n`;
}
