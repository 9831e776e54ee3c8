import { createHash, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate, serveKeygate, type ServedKeygate } from '../helpers/spawn-keygate.js';

/**
 * An EdDSA or ES256 key made the way an operator and a client make one, every step a
 * `bin/keygate.js` child process: `keys keygen --out` on the client's side, `keys create --alg
 * --public-key` on the operator's, `token --private-key` to sign, against a running `keygate
 * serve` on a real Redis. Keygate's store never sees the private key.
 */
describe('EdDSA and ES256 keys through the CLI, against a running keygate', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: ServedKeygate;
  let dir: string;
  let env: Record<string, string>;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    dir = mkdtempSync(join(tmpdir(), 'keygate-asym-cli-'));
    env = { KEYGATE_REDIS_URL: redis.url };
    gate = await serveKeygate({ ...env, KEYGATE_UPSTREAM: upstream.url });
  });
  afterAll(async () => {
    await gate?.stop();
    await upstream?.close();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const call = (t: string) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) });
  /** `keygate keys keygen`: the private key to a file, the public key printed. */
  const keygen = async (alg: string, name: string) => {
    const out = join(dir, name);
    const { stdout } = await runKeygate(['keys', 'keygen', '--alg', alg, '--out', out]);
    const publicFile = `${out}.pub`;
    writeFileSync(publicFile, stdout);
    return { privateFile: out, publicFile, publicPem: stdout };
  };
  const mint = async (apiKey: string, privateFile: string) =>
    (await runKeygate(['token', '--key', apiKey, '--private-key', privateFile])).stdout.trim();

  it.each(['EdDSA', 'ES256'])(
    '%s: keygen, create with the public key, a token from --private-key passes; its replay and another pair are 40106',
    async (alg) => {
      const mine = await keygen(alg, `${alg}.pem`);
      expect(statSync(mine.privateFile).mode & 0o777).toBe(0o600);
      expect(readFileSync(mine.privateFile, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----\n/);
      const spki = createPublicKey(mine.publicPem);
      expect(spki.asymmetricKeyType).toBe(alg === 'EdDSA' ? 'ed25519' : 'ec');
      // keygen never writes over a private key that is already there.
      await expect(runKeygate(['keys', 'keygen', '--alg', alg, '--out', mine.privateFile])).rejects.toMatchObject({
        stderr: expect.stringContaining(mine.privateFile) as unknown,
      });

      const created = JSON.parse(
        (
          await runKeygate(
            ['keys', 'create', '--alg', alg, '--public-key', mine.publicFile, '--scopes', 'accounts:read', '--json'],
            env,
          )
        ).stdout,
      ) as Record<string, unknown>;
      expect(created).toMatchObject({ alg, apiKey: expect.any(String) as unknown, id: expect.any(String) as unknown });
      expect(created).not.toHaveProperty('apiSecret');
      const apiKey = created.apiKey as string;

      // keys show: the alg and the fingerprint of the DER SPKI (what `openssl pkey -pubin -outform DER | sha256sum` prints).
      const shown = JSON.parse((await runKeygate(['keys', 'show', apiKey, '--json'], env)).stdout) as Record<
        string,
        unknown
      >;
      const fingerprint = `sha256:${createHash('sha256')
        .update(spki.export({ type: 'spki', format: 'der' }))
        .digest('hex')}`;
      expect([shown.alg, shown.publicKeyFingerprint]).toEqual([alg, fingerprint]);
      expect(JSON.stringify(shown)).not.toContain('PRIVATE');

      const t = await mint(apiKey, mine.privateFile);
      expect(JSON.parse(Buffer.from(t.split('.')[0] as string, 'base64url').toString())).toEqual({ alg, typ: 'JWT' });
      const before = upstream.received.length;
      const ok = await call(t);
      expect(ok.status).toBe(200);
      expect(upstream.received.length).toBe(before + 1);
      expect(upstream.received.at(-1)?.headers['x-api-key-id']).toBe(created.id);

      const replay = await call(t);
      expect([replay.status, replay.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
      const other = await keygen(alg, `${alg}-other.pem`);
      const forged = await call(await mint(apiKey, other.privateFile));
      expect([forged.status, forged.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
      expect(upstream.received.length).toBe(before + 1);
    },
  );
});
