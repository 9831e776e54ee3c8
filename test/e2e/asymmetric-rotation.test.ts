import { createHash, generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToken } from '../../src/client/create-token.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { bearer, send } from '../helpers/http.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/**
 * EdDSA/ES256 keys through the management API (every answer checked against
 * config/management-openapi.json), and a rotation from HS256 to EdDSA under a
 * steady stream of requests: nothing fails during the grace period, and HS256
 * tokens are 40106 once it has ended.
 */
const ED = generateKeyPairSync('ed25519');
const ES = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const pem = (k: typeof ED.publicKey) => k.export({ type: 'spki', format: 'pem' }).toString();
const fingerprint = (k: typeof ED.publicKey) =>
  `sha256:${createHash('sha256')
    .update(k.export({ type: 'spki', format: 'der' }))
    .digest('hex')}`;

describe('EdDSA and ES256 keys through the management API (real Redis)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let api: ManagementClient;
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'backend', access: 'write' }]);
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    api = managementClient(gate.managementUrl as string, tokens.tokens.backend as string, createOpenApiCheck());
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
    await redis.stop();
  });
  const call = (t: string) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) });

  it.each([
    ['EdDSA', ED],
    ['ES256', ES],
  ] as const)(
    'POST /v1/keys {alg: %s, publicKey}: no secret in the answer, alg and fingerprint shown',
    async (alg, pair) => {
      const made = await api.call('POST', '/v1/keys', {
        json: { alg, publicKey: pem(pair.publicKey), scopes: ['accounts:read'] },
      });
      expect(made.status).toBe(201);
      const body = made.json() as Record<string, unknown>;
      expect(body).not.toHaveProperty('apiSecret');
      expect(body).toMatchObject({ alg, publicKeyFingerprint: fingerprint(pair.publicKey) });
      const shown = (await api.call('GET', `/v1/keys/${body.apiKey as string}`)).json();
      expect(shown).toMatchObject({ alg, publicKeyFingerprint: fingerprint(pair.publicKey) });
      expect(JSON.stringify(shown)).not.toContain('BEGIN');
      const r = await call(await createToken({ apiKey: body.apiKey as string, privateKey: pair.privateKey }));
      expect(r.status).toBe(200);
    },
  );

  it.each([
    ['an ES256 key with an Ed25519 PEM', { alg: 'ES256', publicKey: pem(ED.publicKey) }],
    ['an EdDSA key without a public key', { alg: 'EdDSA' }],
    ['an HS256 key with a public key', { alg: 'HS256', publicKey: pem(ED.publicKey) }],
    [
      'a private key as the public key',
      { alg: 'EdDSA', publicKey: ED.privateKey.export({ type: 'pkcs8', format: 'pem' }) },
    ],
    ['alg none', { alg: 'none', publicKey: pem(ED.publicKey) }],
  ])('POST /v1/keys refuses %s (400, nothing created)', async (_name, json) => {
    const before = ((await api.call('GET', '/v1/keys')).json() as { keys: unknown[] }).keys.length;
    const r = await api.call('POST', '/v1/keys', { json });
    expect(r.status).toBe(400);
    expect(((await api.call('GET', '/v1/keys')).json() as { keys: unknown[] }).keys).toHaveLength(before);
  });

  it('rotate HS256 → EdDSA under a steady stream: no failure during the grace period, HS256 40106 after', async () => {
    const made = (await api.call('POST', '/v1/keys', { json: { scopes: ['accounts:read'] } })).json() as {
      apiKey: string;
      apiSecret: string;
    };
    const { apiKey, apiSecret } = made;
    const samples: Array<{ alg: string; start: number; end: number; status: number; code?: unknown }> = [];
    let rotatedAt: number | undefined = undefined;
    let validUntil = Infinity;
    const stream = async () => {
      // Until 1.5 s past the grace period's end, one request after the other.
      while (Date.now() < validUntil + 1_500) {
        const useEd = rotatedAt !== undefined && samples.length % 2 === 0;
        const t = useEd
          ? await createToken({ apiKey, privateKey: ED.privateKey })
          : await createToken({ apiKey, apiSecret });
        const start = Date.now();
        const r = await call(t);
        samples.push({
          alg: useEd ? 'EdDSA' : 'HS256',
          start,
          end: Date.now(),
          status: r.status,
          code: r.status === 200 ? undefined : (r.json() as { code: number }).code,
        });
      }
    };
    const running = stream();
    await new Promise((r) => setTimeout(r, 300));
    const rotated = await api.call('POST', `/v1/keys/${apiKey}/rotate`, {
      json: { alg: 'EdDSA', publicKey: pem(ED.publicKey), graceSeconds: 3 },
    });
    expect(rotated.status).toBe(200);
    const body = rotated.json() as Record<string, unknown>;
    expect(body).not.toHaveProperty('apiSecret');
    expect(body).toMatchObject({ alg: 'EdDSA', previousSecrets: [{ alg: 'HS256' }] });
    rotatedAt = Date.now();
    validUntil = Date.parse(body.previousSecretValidUntil as string);
    await running;

    // Answered before the deadline: every one passes, whichever alg. Sent after it: HS256 is 40106, EdDSA passes.
    const during = samples.filter((s) => s.end < validUntil);
    const after = samples.filter((s) => s.start > validUntil);
    expect(during.filter((s) => s.status !== 200)).toEqual([]);
    expect(after.filter((s) => s.alg === 'EdDSA' && s.status !== 200)).toEqual([]);
    expect(after.filter((s) => s.alg === 'HS256').every((s) => s.status === 401 && s.code === 40106)).toBe(true);
    // The stream covered every case (so the assertions above cannot pass on nothing).
    expect(during.filter((s) => s.alg === 'HS256' && s.start > (rotatedAt ?? Infinity)).length).toBeGreaterThan(0);
    expect(during.filter((s) => s.alg === 'EdDSA').length).toBeGreaterThan(0);
    expect(after.filter((s) => s.alg === 'HS256').length).toBeGreaterThan(0);
    expect(after.filter((s) => s.alg === 'EdDSA').length).toBeGreaterThan(0);
    console.log(
      `[asymmetric] rotation stream: ${samples.length} requests, ${during.length} during grace, ${after.length} after`,
    );
  });
});
