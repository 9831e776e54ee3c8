// Tested in test/process/assertion-cli.test.ts.
import { chmodSync, existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { readDataFile } from '../../files/read-data-file.js';
import {
  ASSERTION_ALGS,
  AssertionKeysError,
  assertionFileModeProblem,
  loadAssertionKeys,
  newAssertionKey,
  type AssertionAlg,
} from '../../assertion/assertion-keys.js';
import { CliError, UsageError } from '../cli-errors.js';
import { str, type Command } from '../command-line.js';

const FILE_OPTION = {
  name: 'file',
  type: 'string',
  value: 'file',
  help: 'the JWK Set (default: KEYGATE_ASSERTION_KEYS_FILE)',
} as const;

function fileOf(parsed: Parameters<NonNullable<Command['run']>>[0], env: NodeJS.ProcessEnv, option: string): string {
  const file = str(parsed, option) ?? (env.KEYGATE_ASSERTION_KEYS_FILE || undefined);
  if (file === undefined) throw new UsageError(`--${option} <file> or KEYGATE_ASSERTION_KEYS_FILE is required`);
  return file;
}

const problemsOf = (err: unknown) =>
  err instanceof AssertionKeysError ? err.problems.join('; ') : (err as Error).message;

/** `keygate assertion jwks`: the public JWK Set the admin port serves at /.well-known/jwks.json. */
const jwksCommand: Command = {
  spec: {
    name: 'jwks',
    summary: 'print the public JWK Set of the assertion keys (what /.well-known/jwks.json serves)',
    options: [FILE_OPTION],
    details: `Prints the public parts only ("d" is never printed), in file order, for an
upstream that is configured with keys rather than a URL. Checks the file as
"keygate serve" does (KEYGATE_ASSERTION_SIGNING_KID included).
Exit status: 0, or 1 when the file is invalid (the problems on stderr).`,
  },
  run(parsed, io) {
    const file = fileOf(parsed, io.env, 'file');
    try {
      const set = loadAssertionKeys(file, io.env.KEYGATE_ASSERTION_SIGNING_KID || undefined);
      io.out.write(`${JSON.stringify(set.jwks, null, 2)}\n`);
      return 0;
    } catch (err) {
      throw new CliError(`${problemsOf(err)}`, 1);
    }
  },
};

/**
 * `keygate assertion keygen`: a new signing key, into a new file or added at the end of an existing
 * set. At the end it is published but does not sign yet (the first key with a private part signs):
 * the first step of a rotation. Written to a temp file (0600) renamed into place, after the whole
 * new set passed the same checks `serve` makes, so a watching Keygate never reads half a file.
 */
const keygenCommand: Command = {
  spec: {
    name: 'keygen',
    summary: 'make an assertion signing key: a new JWK Set file (mode 0600), or a key added to one',
    options: [
      { name: 'alg', type: 'string', value: 'EdDSA|ES256', help: 'Ed25519 (EdDSA, the default) or P-256 (ES256)' },
      { name: 'out', type: 'string', value: 'file', help: 'the JWK Set to create or add to' },
      { name: 'kid', type: 'string', value: 'id', help: 'the key id (default: alg, date and random hex)' },
    ],
    details: `A new file is created with mode 0600. An existing file gets the key added at
the end: published from the next reload, but the key before it keeps signing
until it loses its private part or KEYGATE_ASSERTION_SIGNING_KID names the new
one (docs/security.md, "Rotating the assertion key"). The new kid is printed.`,
  },
  run(parsed, io) {
    const alg = str(parsed, 'alg') ?? 'EdDSA';
    if (!(ASSERTION_ALGS as readonly string[]).includes(alg)) throw new UsageError('--alg must be EdDSA or ES256');
    const out = str(parsed, 'out');
    if (out === undefined) throw new UsageError('--out <file> is required (the JWK Set to create or add to)');
    let keys: unknown[] = [];
    if (existsSync(out)) {
      const modeProblem = assertionFileModeProblem(out);
      if (modeProblem !== undefined) throw new CliError(modeProblem, 1);
      let data: unknown;
      try {
        data = readDataFile(out);
      } catch (err) {
        throw new CliError(`--out ${out}: ${(err as Error).message}`, 1);
      }
      const list = (data as { keys?: unknown } | null)?.keys;
      if (!Array.isArray(list)) throw new CliError(`--out ${out}: not a JWK Set ({"keys": [...]})`, 1);
      keys = list;
    }
    const key = newAssertionKey(alg as AssertionAlg, str(parsed, 'kid'));
    const tmp = join(dirname(out), `.${randomBytes(6).toString('hex')}.jwks.tmp`);
    try {
      writeFileSync(tmp, `${JSON.stringify({ keys: [...keys, key] }, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
      chmodSync(tmp, 0o600);
      loadAssertionKeys(tmp, undefined);
      renameSync(tmp, out);
    } catch (err) {
      // It holds a private key: never left behind.
      rmSync(tmp, { force: true });
      throw new CliError(`--out ${out}: ${problemsOf(err)}`, 1);
    }
    io.out.write(`${key.kid}\n`);
    io.err.write(
      keys.length === 0
        ? `Wrote ${out} (mode 0600) with the ${alg} signing key ${key.kid}.\n`
        : `Added the ${alg} key ${key.kid} at the end of ${out}: published, not signing yet.\n`,
    );
    return 0;
  },
};

export const assertionCommand: Command = {
  spec: {
    name: 'assertion',
    summary: 'the signed identity assertion (X-Keygate-Assertion): make keys, print the public set',
    options: [],
  },
  subcommands: [keygenCommand, jwksCommand],
};
