import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeysFileError, loadKeysFileWithOwners } from '../../src/keys/keys-file.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { token } from '../helpers/tokens.js';

const S = 'owners-file-secret-0123456789';
const doc = (owners: string[]) =>
  [
    'keys:',
    `  - { apiKey: acme-1, apiSecret: ${S}, scopes: [accounts:read], owner: acme }`,
    `  - { apiKey: acme-2, apiSecret: ${S}, scopes: [accounts:read], owner: acme }`,
    `  - { apiKey: beta-1, apiSecret: ${S}, scopes: [accounts:read], owner: beta }`,
    ...(owners.length > 0 ? ['owners:', ...owners.map((o) => `  ${o}`)] : []),
    '',
  ].join('\n');

/**
 * Issue 42, embedded mode: the keys file's top-level `owners:` gives an owner its own budget, shared
 * by its keys, and a reload puts a changed `owners:` in force with the keys (one swap).
 */
describe('embedded mode: the keys file owners:', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-owners-file-'));
  const file = join(dir, 'keys.yaml');
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  const status = async (k: string) => (await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(k, S)) })).status;

  beforeAll(async () => {
    writeFileSync(file, doc(['beta: { rateLimit: { rate: 1/h } }']));
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, env: { KEYGATE_KEYS_FILE: file } });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  it("an owner's limit from the file applies to its keys; a reload moves it to another owner", async () => {
    expect(await status('beta-1')).toBe(200);
    expect(await status('beta-1')).toBe(429);
    for (let i = 0; i < 4; i++) expect(await status(i % 2 ? 'acme-1' : 'acme-2')).toBe(200);

    writeFileSync(file, doc(['acme: { rateLimit: { rate: 2/h, burst: 2 } }']));
    await expect.poll(() => gate.keygate.store.ownerLimit('acme')?.burst, { timeout: 5_000, interval: 50 }).toBe(2);
    expect(gate.keygate.store.ownerLimit('beta')).toBeUndefined();
    expect([await status('acme-1'), await status('acme-2'), await status('acme-1')]).toEqual([200, 200, 429]);
    expect(await status('beta-1')).toBe(200);
  });

  it('a broken owners: entry is refused with the rest of the file, naming it', () => {
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, doc(['acme: { rateLimit: { rate: lots } }', 'bad name: { rateLimit: { rate: 1/s } }']));
    let problems: readonly string[] = [];
    try {
      loadKeysFileWithOwners(bad);
    } catch (err) {
      if (!(err instanceof KeysFileError)) throw err;
      problems = err.problems;
    }
    expect(problems.some((p) => p.includes('owners.acme.rateLimit.rate'))).toBe(true);
    expect(problems.some((p) => p.includes('owners.bad name'))).toBe(true);
    const good = join(dir, 'good.yaml');
    writeFileSync(good, doc(['acme: { rateLimit: { rate: 2/h, burst: 2 } }']));
    expect(loadKeysFileWithOwners(good).owners).toEqual([{ owner: 'acme', rateLimit: { rate: '2/h', burst: 2 } }]);
  });
});
