import { Readable, Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { KeyNotFound, UsageError } from '../../src/cli/cli-errors.js';
import {
  flag,
  parseCommandLine,
  renderHelp,
  runCommand,
  str,
  type Command,
  type CommandSpec,
} from '../../src/cli/command-line.js';

const SPEC: CommandSpec = {
  name: 'thing',
  summary: 'do a thing',
  args: ['<name>', '[extra]'],
  options: [
    { name: 'count', type: 'string', value: 'n', help: 'how many' },
    { name: 'loud', type: 'boolean', help: 'shout' },
  ],
  details: 'More words.',
};

describe('parseCommandLine', () => {
  it.each<[string[], { args: string[]; count?: string; loud: boolean; help: boolean } | string]>([
    [['a'], { args: ['a'], loud: false, help: false }],
    [['a', 'b', '--count', '3', '--loud'], { args: ['a', 'b'], count: '3', loud: true, help: false }],
    [['--count=3', 'a'], { args: ['a'], count: '3', loud: false, help: false }],
    [['-h'], { args: [], loud: false, help: true }],
    [['--help', '--loud'], { args: [], loud: true, help: true }],
    [['--', '--loud'], { args: ['--loud'], loud: false, help: false }],
    [[], 'missing argument <name>'],
    [['a', 'b', 'c'], 'unexpected argument "c"'],
    [['a', '--lound'], "unknown option '--lound'"],
    [['a', '-x'], "unknown option '-x'"],
    [['a', '--count'], "option '--count' needs a value"],
    [['a', '--count', '--loud'], "option '--count' needs a value"],
    [['a', '--loud=yes'], "option '--loud' takes no value"],
  ])('%j', (argv, expected) => {
    if (typeof expected === 'string') {
      expect(() => parseCommandLine(SPEC, argv)).toThrow(new UsageError(expected));
      return;
    }
    const p = parseCommandLine(SPEC, argv);
    expect({
      args: p.args,
      ...(str(p, 'count') !== undefined && { count: str(p, 'count') }),
      loud: flag(p, 'loud'),
      help: p.help,
    }).toEqual(expected);
  });
});

describe('renderHelp', () => {
  it('usage line, summary, aligned options with -h, details', () => {
    expect(renderHelp('keygate thing', { spec: SPEC })).toBe(
      'Usage: keygate thing <name> [extra] [options]\n\ndo a thing\n\nOptions:\n  --count <n>  how many\n  --loud       shout\n  -h, --help   print this help\n\nMore words.\n',
    );
  });
});

describe('runCommand', () => {
  const io = () => {
    const text = { out: '', err: '' };
    const sink = (k: 'out' | 'err') => new Writable({ write: (c, _e, cb) => ((text[k] += String(c)), cb()) });
    return {
      text,
      io: {
        out: sink('out'),
        err: sink('err'),
        env: {},
        stdin: Readable.from([]),
        openKeyStore: () => Promise.reject(new Error('unused')),
      },
    };
  };
  const leaf = (run: Command['run']): Command => ({ spec: SPEC, run });
  const group = (sub: Command): Command => ({
    spec: { name: 'top', summary: 'the top', options: [] },
    subcommands: [sub],
  });

  it.each<[string, Command, string[], number, string, string | RegExp]>([
    ['a synchronous command stays synchronous', leaf(() => 0), ['a'], 0, '', ''],
    ['its own exit status', leaf(() => 1), ['a'], 1, '', ''],
    [
      '--help on stdout, without running',
      leaf(() => {
        throw new Error('ran');
      }),
      ['--help'],
      0,
      'Usage: keygate thing',
      '',
    ],
    [
      'a UsageError: exit 2, the command path, a pointer to help',
      leaf(() => {
        throw new UsageError('bad');
      }),
      ['a'],
      2,
      '',
      'keygate thing: bad\nSee "keygate thing --help".\n',
    ],
    [
      'KeyNotFound: exit 1',
      leaf(() => {
        throw new KeyNotFound('k1');
      }),
      ['a'],
      1,
      '',
      'keygate thing: no key "k1"\n',
    ],
    [
      'a subcommand, with its path in errors',
      group(
        leaf(() => {
          throw new UsageError('deep');
        }),
      ),
      ['thing', 'a'],
      2,
      '',
      /^keygate thing: deep\n/,
    ],
    ['an unknown subcommand', group(leaf(() => 0)), ['other'], 2, '', /^keygate: unknown command "other"\n/],
    [
      'no subcommand: help on stderr',
      group(leaf(() => 0)),
      [],
      2,
      '',
      /^Usage: keygate <command>\n\nthe top\n\nCommands:\n {2}thing {2}do a thing\n/,
    ],
  ])('%s', async (_name, cmd, argv, code, out, err) => {
    const { text, io: cliIo } = io();
    const path = cmd.subcommands ? 'keygate' : 'keygate thing';
    const result = runCommand(cmd, argv, cliIo, path);
    if (_name.includes('synchronous')) expect(result).toBe(0);
    expect(await result).toBe(code);
    expect(text.out.startsWith(out)).toBe(true);
    if (typeof err === 'string') expect(text.err).toBe(err);
    else expect(text.err).toMatch(err);
  });

  it('an error that is not a CliError is a bug: rethrown, sync or async', async () => {
    const { io: cliIo } = io();
    expect(() =>
      runCommand(
        leaf(() => {
          throw new TypeError('bug');
        }),
        ['a'],
        cliIo,
        'x',
      ),
    ).toThrow('bug');
    await expect(
      runCommand(
        leaf(() => Promise.reject(new TypeError('async bug'))),
        ['a'],
        cliIo,
        'x',
      ),
    ).rejects.toThrow('async bug');
  });
});
