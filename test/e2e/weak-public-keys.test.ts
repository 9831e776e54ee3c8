import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseKeyRecord, type KeyRecord } from '../../src/keys/key-record.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate } from '../helpers/spawn-keygate.js';
import { b64url, claims } from '../helpers/tokens.js';

/**
 * Issue 46, item 1: a weak public key is refused wherever it enters (the CLI, the management API,
 * import, the keys file) with one sentence naming the problem, and one already stored is refused at
 * load (a log line and keygate_refused_public_keys_total): the forged token that verifies under it
 * with node:crypto (R = identity, S = 0) is 40106 and reaches nothing.
 */
const IDENTITY = '0100000000000000000000000000000000000000000000000000000000000000';
const ORDER_8 = 'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa';
const NON_CANONICAL = 'edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f';
const armour = (der: Buffer) => `-----BEGIN PUBLIC KEY-----\n${der.toString('base64')}\n-----END PUBLIC KEY-----\n`;
const edPem = (point: string) => armour(Buffer.from(`302a300506032b6570032100${point}`, 'hex'));
const p256Pem = (point: Buffer) => {
  const bits = Buffer.concat([Buffer.from([0x03, point.length + 1, 0x00]), point]);
  const body = Buffer.concat([Buffer.from('301306072a8648ce3d020106082a8648ce3d030107', 'hex'), bits]);
  return armour(Buffer.concat([Buffer.from([0x30, body.length]), body]));
};
const compressed = generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey.export({
  type: 'spki',
  format: 'der',
});

/** [name, alg, PEM, what the one error says] */
const WEAK: Array<[string, 'EdDSA' | 'ES256', string, string]> = [
  ['the Ed25519 identity', 'EdDSA', edPem(IDENTITY), 'small-order Ed25519 point'],
  ['an Ed25519 point of order 8', 'EdDSA', edPem(ORDER_8), 'small-order Ed25519 point'],
  ['a non-canonical Ed25519 encoding (y = p)', 'EdDSA', edPem(NON_CANONICAL), 'non-canonical Ed25519 encoding'],
  ['the P-256 point at infinity', 'ES256', p256Pem(Buffer.from([0])), 'not in uncompressed form'],
  [
    'a compressed P-256 point',
    'ES256',
    p256Pem(
      (() => {
        const raw = Buffer.from(compressed.subarray(26));
        return Buffer.concat([Buffer.from([2 + ((raw[64] as number) & 1)]), raw.subarray(1, 33)]);
      })(),
    ),
    'not in uncompressed form',
  ],
];

/** The token that verifies under the identity key for any claims: R = identity, S = 0. */
function forgedToken(apiKey: string): string {
  const h = b64url(JSON.stringify({ alg: 'EdDSA', typ: 'JWT' }));
  const p = b64url(JSON.stringify(claims(apiKey)));
  return `${h}.${p}.${Buffer.concat([Buffer.from(IDENTITY, 'hex'), Buffer.alloc(32)]).toString('base64url')}`;
}

describe('weak public keys (real Redis)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let api: ManagementClient;
  let dir: string;
  let env: Record<string, string>;
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    dir = mkdtempSync(join(tmpdir(), 'keygate-weak-'));
    const tokens = writeTokensFile([{ name: 'backend', access: 'write' }], dir);
    env = { KEYGATE_REDIS_URL: redis.url, KEYGATE_ALLOW_VOLATILE_KEY_CHANGES: 'true' };
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { ...env, KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    api = managementClient(gate.managementUrl as string, tokens.tokens.backend as string, createOpenApiCheck());
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => upstream.reset());

  const keyCount = async () => ((await api.call('GET', '/v1/keys')).json() as { keys: unknown[] }).keys.length;

  it.each(WEAK)('POST /v1/keys refuses %s: 400 naming it, nothing created', async (_name, alg, publicKey, error) => {
    const before = await keyCount();
    const r = await api.call('POST', '/v1/keys', { json: { alg, publicKey, scopes: ['accounts:read'] } });
    expect(r.status).toBe(400);
    expect(r.body).toContain(error);
    expect(await keyCount()).toBe(before);
  });

  it.each(WEAK)('POST /v1/keys/{apiKey}/rotate refuses %s', async (_name, alg, publicKey, error) => {
    const made = (await api.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'] } })).json() as {
      apiKey: string;
    };
    const r = await api.call('POST', `/v1/keys/${made.apiKey}/rotate`, { json: { alg, publicKey } });
    expect(r.status).toBe(400);
    expect(r.body).toContain(error);
    const shown = (await api.call('GET', `/v1/keys/${made.apiKey}`)).json() as { alg: string };
    expect(shown.alg).toBe('HS256');
  });

  it.each(WEAK)(
    'keygate keys create and rotate refuse %s (exit 2, one line naming it)',
    async (_name, alg, pem, error) => {
      const file = join(dir, `weak-${alg}.pem`);
      writeFileSync(file, pem);
      const before = await keyCount();
      const created = await runKeygate(['keys', 'create', '--alg', alg, '--public-key', file], env).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(created.code).toBe(2);
      expect(created.stderr).toContain(error);
      expect(await keyCount()).toBe(before);
      const made = (await api.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'] } })).json() as {
        apiKey: string;
      };
      const rotated = await runKeygate(['keys', 'rotate', made.apiKey, '--alg', alg, '--public-key', file], env).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(rotated.code).toBe(2);
      expect(rotated.stderr).toContain(error);
    },
  );

  it('keygate keys import refuses a file holding a weak key, and imports none of it', async () => {
    const file = join(dir, 'import.json');
    const good = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
    writeFileSync(
      file,
      JSON.stringify({
        keys: [
          { apiKey: 'imp-good', alg: 'EdDSA', publicKey: good, scopes: [] },
          { apiKey: 'imp-weak', alg: 'EdDSA', publicKey: edPem(IDENTITY), scopes: [] },
        ],
      }),
    );
    const r = await runKeygate(['keys', 'import', file], env).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => e,
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('small-order Ed25519 point');
    expect((await api.call('GET', '/v1/keys/imp-weak')).status).toBe(404);
    expect((await api.call('GET', '/v1/keys/imp-good')).status).toBe(404);
  });

  it('a weak key already stored is refused at load: the forged token is 40106, one log line, the metric', async () => {
    // Written as an older Keygate would have (stored records are not re-checked by the parser).
    const { record, errors } = parseKeyRecord(
      {
        apiKey: 'stored-weak',
        id: 'id-stored-weak',
        alg: 'EdDSA',
        publicKey: edPem(IDENTITY),
        scopes: ['accounts:read'],
      },
      'test',
      true,
    );
    expect(errors).toEqual([]);
    await gate.keygate.store.putKey(record as KeyRecord);
    for (let i = 0; i < 2; i++) {
      const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(forgedToken('stored-weak')) });
      expect([r.status, r.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
    }
    expect(upstream.received).toEqual([]);
    const lines = gate.logs.filter((l) => l.includes('stored public key refused'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('"keyId":"id-stored-weak"');
    expect(lines[0]).toContain('small-order Ed25519 point');
    const metrics = (await send(gate.adminUrl, '/metrics')).body;
    expect(Number(/^keygate_refused_public_keys_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    // The operator can still see it and revoke it.
    expect((await api.call('GET', '/v1/keys/stored-weak')).status).toBe(200);
    expect((await api.call('POST', '/v1/keys/stored-weak/revoke', { json: {} })).status).toBe(200);
  });
});

describe('weak public keys in a keys file (embedded mode)', () => {
  it.each(WEAK)('keygate check-config refuses a keys file with %s', async (_name, alg, publicKey, error) => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-weak-file-'));
    try {
      const file = join(dir, 'keys.json');
      writeFileSync(file, JSON.stringify({ keys: [{ apiKey: 'weak', alg, publicKey, scopes: [] }] }));
      const r = await runKeygate(['check-config'], {
        KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
        KEYGATE_KEYS_FILE: file,
      }).then(
        () => ({ code: 0, stderr: '' }),
        (e: { code: number; stderr: string }) => e,
      );
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`keys[0].publicKey: ${''}`);
      expect(r.stderr).toContain(error);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
