import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { packagesOf } from '../../scripts/harness/record-modules.mjs';
import { KEYGATE_BIN, childEnv } from '../../scripts/harness/spawn-keygate.mjs';

/**
 * Which packages a command loads, as the module loader saw them (scripts/harness/record-modules.mjs): a light
 * command never loads the Redis client, the HTTP client, metrics, the logger, the schema validator or the YAML
 * reader. What a process loads does not depend on how busy the machine is; its start time does, so this is
 * what the test holds (the start times are in docs/reference/cli.md, from `npm run bench:cli`).
 */
const HEAVY = ['ioredis', 'undici', 'prom-client', 'pino', 'ajv', 'yaml'];
const RECORDER = fileURLToPath(new URL('../../scripts/harness/record-modules.mjs', import.meta.url));
const DEMO_KEYS = fileURLToPath(new URL('../../examples/demo-keys.yaml', import.meta.url));
const run = promisify(execFile);

const dir = mkdtempSync(join(tmpdir(), 'keygate-light-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** The packages `keygate <args>` loaded; the command must succeed. */
async function packagesLoadedBy(args: string[], env: Record<string, string> = {}): Promise<string[]> {
  const file = join(dir, `modules-${n++}.txt`);
  await run(process.execPath, ['--import', RECORDER, KEYGATE_BIN, ...args], {
    env: childEnv('inherit', { ...env, RECORD_MODULES_FILE: file }),
  });
  return packagesOf(readFileSync(file, 'utf8').split('\n'));
}

const assertionFile = join(dir, 'assertion.json');
const privateKeyFile = join(dir, 'client.pem');

// In order: the keygen rows write the files the rows after them read.
const LIGHT: Array<[string, string[], Record<string, string>?]> = [
  ['token (HS256)', ['token', '--key', 'k', '--secret', 'a-secret-of-enough-length-0123']],
  ['keys keygen', ['keys', 'keygen', '--out', privateKeyFile]],
  ['token --private-key', ['token', '--key', 'k', '--private-key', privateKeyFile]],
  [
    'token --bind',
    ['token', '--key', 'k', '--bind', 'GET', '/api/v3/orders'],
    { KEYGATE_API_SECRET: 'a-secret-0123456789abcdef' },
  ],
  ['--version', ['--version']],
  ['version', ['version']],
  ['help', ['help']],
  ['--help', ['--help']],
  ['help keys create', ['help', 'keys', 'create']],
  ['keys --help', ['keys', '--help']],
  ['management-token', ['management-token', '--name', 'ci', '--access', 'read']],
  ['assertion keygen', ['assertion', 'keygen', '--out', assertionFile]],
  ['assertion jwks', ['assertion', 'jwks', '--file', assertionFile]],
];

const UPSTREAM = { KEYGATE_UPSTREAM: 'http://127.0.0.1:9' };
/** What check-config must not load: it reads files (the schema validator and, for what the fast reader leaves, the YAML reader) and contacts nothing. */
const SERVER = ['ioredis', 'undici', 'prom-client', 'pino'];

describe('a light command loads none of the server packages', () => {
  it.each(LIGHT)('%s', async (_name, args, env) => {
    expect((await packagesLoadedBy(args, env)).filter((p) => HEAVY.includes(p))).toEqual([]);
  });

  it('check-config loads the schema validator it checks the files with (so the recorder sees packages), and nothing of the server', async () => {
    const loaded = await packagesLoadedBy(['check-config'], { ...UPSTREAM, KEYGATE_KEYS_FILE: DEMO_KEYS });
    expect(loaded).toContain('ajv');
    expect(loaded.filter((p) => SERVER.includes(p))).toEqual([]);
  });

  it('check-config with Redis configured does not load the Redis client: it contacts nothing', async () => {
    const loaded = await packagesLoadedBy(['check-config'], { ...UPSTREAM, KEYGATE_REDIS_URL: 'redis://127.0.0.1:9' });
    expect(loaded.filter((p) => SERVER.includes(p))).toEqual([]);
  });
});

describe('keygate/client and keygate/verify load none of the server packages', () => {
  it.each(['keygate/client', 'keygate/verify'])('%s', async (specifier) => {
    const file = join(dir, `modules-${n++}.txt`);
    await run(
      process.execPath,
      ['--import', RECORDER, '--input-type=module', '-e', `await import(${JSON.stringify(specifier)})`],
      {
        env: childEnv('inherit', { RECORD_MODULES_FILE: file }),
      },
    );
    const modules = readFileSync(file, 'utf8').split('\n');
    // The import itself went through the recorder: the package's own entry is in the list.
    expect(modules.some((m) => m.includes('/dist/client/'))).toBe(true);
    expect(packagesOf(modules).filter((p) => HEAVY.includes(p))).toEqual([]);
  });
});
