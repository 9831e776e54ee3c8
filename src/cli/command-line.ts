import { parseArgs } from 'node:util';
import type { CliIo } from './cli-io.js';
import { exitCodeFor, UsageError } from './cli-errors.js';

/**
 * Every command and key action is declared once, as data: its arguments and
 * options with their help. The same declaration parses the command line,
 * prints `--help`, and generates docs/reference/cli.md, so the three cannot
 * disagree.
 *
 * Parsing is node:util parseArgs, not commander: a commander version of this
 * module measured 99 lines against 129 before fixing where it differed (root
 * --help exit 1, an unknown command reported as "too many arguments"), and it
 * needed glue for camelCased option keys, --no-expiry read as a negation, and
 * the synchronous management-token path, for a new runtime dependency.
 */
export interface OptionSpec {
  readonly name: string;
  readonly type: 'string' | 'boolean';
  /** What the value looks like in help, for string options: `--ttl <30d>`. */
  readonly value?: string;
  readonly help: string;
}

export interface CommandSpec {
  readonly name: string;
  /** One line, shown in the parent's list and at the top of the command's help. */
  readonly summary: string;
  /** Positional arguments: `<apiKey>` is required, `[command]` optional. */
  readonly args?: readonly string[];
  readonly options: readonly OptionSpec[];
  /** Prose after the options: environment variables, exit status, caveats. */
  readonly details?: string;
}

export interface Parsed {
  readonly args: readonly string[];
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
}

/** A command runs with its parsed line, or dispatches to one of its subcommands (`keys create`). */
export interface Command {
  readonly spec: CommandSpec;
  readonly run?: (parsed: Parsed, io: CliIo) => number | Promise<number>;
  readonly subcommands?: readonly (Command | LazyCommand)[];
}

/**
 * A command whose module is imported only when it is the one run (or its own help is asked for), so
 * `keygate token` never loads what `keygate serve` needs. Its name and summary are here for the parent's
 * list; the loaded command declares the same two (test/unit/cli-reference.test.ts holds them equal).
 */
export interface LazyCommand {
  readonly spec: Pick<CommandSpec, 'name' | 'summary'>;
  readonly load: () => Promise<Command>;
}

const isLazy = (c: Command | LazyCommand): c is LazyCommand => 'load' in c;

/** The command with every lazy command below it loaded: what the generated reference walks. */
export async function loadAll(cmd: Command | LazyCommand): Promise<Command> {
  const c = isLazy(cmd) ? await cmd.load() : cmd;
  return c.subcommands ? { ...c, subcommands: await Promise.all(c.subcommands.map(loadAll)) } : c;
}

/** A loaded command, or a bug: a walk over the whole tree runs on loadAll's result. */
export function loaded(c: Command | LazyCommand): Command {
  if (isLazy(c)) throw new Error(`command ${c.spec.name} is not loaded (use loadAll)`);
  return c;
}

export const str = (p: Parsed, name: string): string | undefined => {
  const v = p.values[name];
  return typeof v === 'string' ? v : undefined;
};
export const flag = (p: Parsed, name: string): boolean => p.values[name] === true;

const HELP: OptionSpec = { name: 'help', type: 'boolean', help: 'print this help' };

/** Parses `argv` against `spec`; a wrong line is a UsageError in our words (never parseArgs' own text). */
export function parseCommandLine(spec: CommandSpec, argv: readonly string[]): Parsed & { help: boolean } {
  const options = Object.fromEntries(
    [...spec.options, HELP].map((o) => [o.name, { type: o.type, ...(o.name === 'help' && { short: 'h' }) }]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: [...argv], options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(parseErrorText(err as Error & { code?: string }));
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const { positionals } = parsed;
  if (values.help) return { args: positionals, values, help: true };
  const all = spec.args ?? [];
  const required = all.filter((a) => a.startsWith('<'));
  if (positionals.length < required.length) throw new UsageError(`missing argument ${required[positionals.length]}`);
  if (positionals.length > all.length)
    throw new UsageError(`unexpected argument ${JSON.stringify(positionals[all.length])}`);
  return { args: positionals, values, help: false };
}

function parseErrorText(err: Error & { code?: string }): string {
  const named = /'(-[^' ]+)/.exec(err.message)?.[1] ?? '';
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return `unknown option '${named}'`;
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE':
      return /does not take/.test(err.message) ? `option '${named}' takes no value` : `option '${named}' needs a value`;
    default:
      throw err;
  }
}

/** `keygate keys show <apiKey> [options]` */
export const usageLine = (path: string, { spec, subcommands }: Command) =>
  [path, ...(subcommands ? ['<command>'] : (spec.args ?? [])), ...(spec.options.length > 0 ? ['[options]'] : [])].join(
    ' ',
  );

export const optionLabel = (o: OptionSpec) =>
  o.type === 'string' ? `--${o.name} <${o.value ?? 'value'}>` : o.name === 'help' ? '-h, --help' : `--${o.name}`;

function columns(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(...rows.map(([l]) => l.length));
  return rows.map(([l, r]) => `  ${l.padEnd(width)}  ${r}`).join('\n');
}

/** The text `<path> --help` prints. */
export function renderHelp(path: string, cmd: Command): string {
  const { spec, subcommands } = cmd;
  const parts = [`Usage: ${usageLine(path, cmd)}`, spec.summary];
  if (subcommands) parts.push(`Commands:\n${columns(subcommands.map((c) => [c.spec.name, c.spec.summary]))}`);
  parts.push(`Options:\n${columns([...spec.options, HELP].map((o) => [optionLabel(o), o.help]))}`);
  if (spec.details) parts.push(spec.details.trimEnd());
  if (subcommands) parts.push(`Run "${path} <command> --help" for the arguments and options of one command.`);
  return `${parts.join('\n\n')}\n`;
}

/**
 * Parses, answers --help, runs (or dispatches to a subcommand), and turns a
 * CliError into its message and exit status: the one place where that happens.
 * Synchronous when the command is.
 */
export function runCommand(cmd: Command, argv: readonly string[], io: CliIo, path: string): number | Promise<number> {
  try {
    const [first, ...rest] = argv;
    if (cmd.subcommands && first === undefined) {
      io.err.write(renderHelp(path, cmd));
      return 2;
    }
    if (cmd.subcommands && first !== undefined && !first.startsWith('-')) {
      const sub = cmd.subcommands.find((c) => c.spec.name === first);
      if (!sub) throw new UsageError(`unknown command ${JSON.stringify(first)}`);
      const subPath = `${path} ${first}`;
      if (!isLazy(sub)) return runCommand(sub, rest, io, subPath);
      return sub.load().then((c) => runCommand(c, rest, io, subPath));
    }
    const parsed = parseCommandLine(cmd.spec, argv);
    if (parsed.help || !cmd.run) {
      io.out.write(renderHelp(path, cmd));
      return 0;
    }
    const result = cmd.run(parsed, io);
    return typeof result === 'number' ? result : result.catch((e: unknown) => exitCodeFor(e, io.err, path));
  } catch (e) {
    return exitCodeFor(e, io.err, path);
  }
}
