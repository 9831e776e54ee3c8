import { generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSecret } from '../../src/keys/secret-format.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { parseAuditEntry, type AuditEntry } from '../../src/store/audit-entry.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';

/** Two P-256 key pairs standing in for GitHub's secret scanning keys. */
const ID_1 = 'bcb53661c06b4728e59d897fb6165d5c9cda0fd9cdf9d09ead458168deb7518c';
const ID_2 = '0f3e8d3b1a2c4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9d0e1f2a3b';
const pair = () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const github1 = pair();
const github2 = pair();
const stranger = pair();
const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }) as string;
const signed = (body: string, key: KeyObject) =>
  sign('sha256', Buffer.from(body), { key, dsaEncoding: 'der' }).toString('base64');

type Made = { apiKey: string; apiSecret: string };

describe('GitHub secret scanning: a signed report revokes a leaked key on every instance', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let writer: ManagementClient;
  let raw: Redis;
  const openapi = createOpenApiCheck();

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'backend', access: 'write' }]);
    const dir = mkdtempSync(join(tmpdir(), 'kg-scanning-'));
    const keysFile = join(dir, 'github-keys.json');
    writeFileSync(
      keysFile,
      JSON.stringify({
        public_keys: [
          { key_identifier: ID_1, key: pem(github1.publicKey), is_current: true },
          { key_identifier: ID_2, key: pem(github2.publicKey), is_current: false },
        ],
      }),
    );
    const env = {
      KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      KEYGATE_GITHUB_SCANNING_KEYS_FILE: keysFile,
    };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    writer = managementClient(a.managementUrl as string, tokens.tokens.backend as string, openapi);
    raw = new Redis(redis.url);
  });
  afterAll(async () => {
    raw?.disconnect();
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const create = async (): Promise<Made> =>
    (await writer.call('POST', '/v1/keys', { json: { owner: 'acme', scopes: ['accounts:read'] } })).json() as Made;
  const call = (gate: RunningKeygate, k: { apiKey: string }, secret: string) =>
    send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(k.apiKey, secret)) });
  const report = (body: string, id: string, signature: string): Promise<Reply> =>
    writer.call('POST', '/v1/secret-scanning/github', {
      token: null,
      body,
      headers: {
        'content-type': 'application/json',
        'github-public-key-identifier': id,
        'github-public-key-signature': signature,
      },
    });
  const body = (...tokens: string[]) =>
    JSON.stringify(
      tokens.map((t) => ({
        token: t,
        type: 'keygate_secret',
        url: 'https://github.com/o/r/blob/x/.env',
        source: 'content',
      })),
    );
  const audit = async (): Promise<AuditEntry[]> =>
    (await raw.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, f]) => parseAuditEntry(f[1] as string) as AuditEntry,
    );

  it('a signed report of a current secret: true_positive, revoked on the other instance (published, not a cache expiry), audited leaked with url and source', async () => {
    const k = await create();
    expect((await call(b, k, k.apiSecret)).status).toBe(200); // cached on b
    const text = body(k.apiSecret);
    const started = performance.now();
    const r = await report(text, ID_1, signed(text, github1.privateKey));
    expect(r.status).toBe(200);
    expect(r.json()).toEqual([{ token_raw: k.apiSecret, token_type: 'keygate_secret', label: 'true_positive' }]);
    await expect.poll(async () => (await call(b, k, k.apiSecret)).status, PUBLISHED_WITHIN).toBe(404);
    console.log(`[scanning] revoked on the other instance after ${Math.round(performance.now() - started)} ms`);
    expect((await a.keygate.store.getKey(k.apiKey))?.state).toBe('revoked');
    const entry = (await audit()).find((e) => e.apiKey === k.apiKey && e.action === 'revoke');
    expect(entry).toMatchObject({
      actor: 'github-secret-scanning',
      reason: 'leaked',
      url: 'https://github.com/o/r/blob/x/.env',
      source: 'content',
      owner: 'acme',
    });
    // Reported again: no longer live.
    const again = await report(text, ID_1, signed(text, github1.privateKey));
    expect((again.json() as { label: string }[])[0]?.label).toBe('false_positive');
  });

  it('a forged signature, an unknown identifier and a body replayed under another key id each answer 401 and change nothing', async () => {
    const k = await create();
    const text = body(k.apiSecret);
    const before = (await audit()).length;
    const refused = [
      await report(text, ID_1, signed(text, stranger.privateKey)), // forged
      await report(text, 'ffffffffffffffffffffffffffffffff', signed(text, github1.privateKey)), // unknown id
      await report(text, ID_1, signed(text, github2.privateKey)), // signed by key 2, sent as key 1
      await report(text, ID_2, signed(text, github1.privateKey)), // and the other way round
      await report(`${text} `, ID_1, signed(text, github1.privateKey)), // a byte changed after signing
      await report(text, ID_1, 'not base64!'),
    ];
    for (const r of refused)
      expect([r.status, (r.json() as { error: string }).error]).toEqual([401, 'signature_invalid']);
    const none = await writer.call('POST', '/v1/secret-scanning/github', {
      token: null,
      body: text,
      headers: { 'content-type': 'application/json' },
    });
    expect(none.status).toBe(401);
    expect((await audit()).length).toBe(before);
    expect((await call(b, k, k.apiSecret)).status).toBe(200);
    // The second key verifies its own signatures.
    const ok = await report(text, ID_2, signed(text, github2.privateKey));
    expect((ok.json() as { label: string }[])[0]?.label).toBe('true_positive');
  });

  it('labels are given per token, in order: unknown secrets and look-alikes are false_positive', async () => {
    const k = await create();
    const text = body(generateSecret(), k.apiSecret, 'not-a-secret-at-all', k.apiKey);
    const r = await report(text, ID_1, signed(text, github1.privateKey));
    expect((r.json() as { label: string }[]).map((x) => x.label)).toEqual([
      'false_positive',
      'true_positive',
      'false_positive',
      'false_positive',
    ]);
    const scrape = (await send(a.adminUrl, '/metrics')).body;
    expect(scrape).toMatch(/^keygate_secret_scanning_reports_total\{label="true_positive"\} [1-9]/m);
    expect(scrape).toMatch(/^keygate_secret_scanning_reports_total\{label="false_positive"\} [1-9]/m);
  });

  it('a previous secret inside its grace ends that grace at once; the key and its current secret stay', async () => {
    const k = await create();
    const rotated = (
      await writer.call('POST', `/v1/keys/${k.apiKey}/rotate`, { json: { graceSeconds: 3600 } })
    ).json() as Made;
    expect((await call(b, k, k.apiSecret)).status).toBe(200); // the old secret works, cached on b
    const text = body(k.apiSecret);
    const r = await report(text, ID_1, signed(text, github1.privateKey));
    expect((r.json() as { label: string }[])[0]?.label).toBe('true_positive');
    await expect.poll(async () => (await call(b, k, k.apiSecret)).status, PUBLISHED_WITHIN).not.toBe(200);
    expect((await call(b, k, rotated.apiSecret)).status).toBe(200);
    expect((await a.keygate.store.getKey(k.apiKey))?.state).toBe('active');
    expect((await audit()).find((e) => e.apiKey === k.apiKey && e.action === 'end-grace')).toMatchObject({
      reason: 'leaked',
      source: 'content',
      actor: 'github-secret-scanning',
    });
    // The ended secret is no longer live: reported again, false_positive.
    const again = await report(text, ID_1, signed(text, github1.privateKey));
    expect((again.json() as { label: string }[])[0]?.label).toBe('false_positive');
  });

  it('a reported secret of an expired key revokes it (audited and announced as any leak): a renewal cannot bring the secret back', async () => {
    const k = await create();
    const past = new Date(Date.now() - 60_000).toISOString();
    expect((await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { expiresAt: past } })).status).toBe(200);
    await expect.poll(async () => (await call(b, k, k.apiSecret)).status, PUBLISHED_WITHIN).toBe(404);
    const text = body(k.apiSecret);
    const r = await report(text, ID_1, signed(text, github1.privateKey));
    expect((r.json() as { label: string }[])[0]?.label).toBe('true_positive');
    expect((await a.keygate.store.getKey(k.apiKey))?.state).toBe('revoked');
    // The audit entry is what the webhook delivers (key.revoked, reason leaked).
    expect((await audit()).find((e) => e.apiKey === k.apiKey && e.action === 'revoke')).toMatchObject({
      actor: 'github-secret-scanning',
      reason: 'leaked',
      source: 'content',
    });
    const future = new Date(Date.now() + 86_400_000).toISOString();
    const renewal = await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { expiresAt: future } });
    expect(renewal.status).toBe(409);
    expect((await call(b, k, k.apiSecret)).status).toBe(404);
  });

  it("a secret names one key: a second key holding another key's secret is refused (import), so a report finds every key it admits", async () => {
    const k = await create();
    const twin = makeKey({ apiKey: 'twin-of-leaked', secret: k.apiSecret, owner: 'acme' });
    const ops = createKeyOperations({ store: a.keygate.store, now: Date.now, audit: () => {} });
    const imported = await ops.importKeys([twin], false, 'test');
    expect(imported).toMatchObject({ ok: false, refused: 'conflict' });
    expect(JSON.stringify(imported)).toContain('another key already holds its secret');
    expect(await a.keygate.store.getKey('twin-of-leaked')).toBeNull();
    const text = body(k.apiSecret);
    const r = await report(text, ID_1, signed(text, github1.privateKey));
    expect((r.json() as { label: string }[])[0]?.label).toBe('true_positive');
    expect((await call(b, k, k.apiSecret)).status).not.toBe(200);
  });

  it('a body over 1 MiB is 413 and changes nothing; no fingerprint or secret is in the audit', async () => {
    const big = `[${' '.repeat(1024 * 1024)}]`;
    const r = await report(big, ID_1, signed(big, github1.privateKey));
    expect([r.status, (r.json() as { error: string }).error]).toEqual([413, 'report_too_large']);
    const fps = await raw.hkeys('keygate:{keystore}:fingerprints');
    expect(fps.length).toBeGreaterThan(0);
    const stream = JSON.stringify(await raw.xrange('keygate:{keystore}:audit', '-', '+'));
    for (const fp of fps) expect(stream).not.toContain(fp);
    expect(stream).not.toContain('kgs_');
  });
});

describe('GitHub secret scanning on a listener of its own (KEYGATE_SCANNING_PORT): that one path, nothing else', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let writer: ManagementClient;
  let writeToken: string;
  const openapi = createOpenApiCheck();
  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'backend', access: 'write' }]);
    writeToken = tokens.tokens.backend as string;
    const keysFile = join(mkdtempSync(join(tmpdir(), 'kg-scanning-own-')), 'github-keys.json');
    writeFileSync(
      keysFile,
      JSON.stringify({ public_keys: [{ key_identifier: ID_1, key: pem(github1.publicKey), is_current: true }] }),
    );
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: {
        KEYGATE_MANAGEMENT_PORT: '0',
        KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
        KEYGATE_GITHUB_SCANNING_KEYS_FILE: keysFile,
        KEYGATE_SCANNING_PORT: '0',
        KEYGATE_SCANNING_HOST: '127.0.0.1',
      },
    });
    writer = managementClient(gate.managementUrl as string, tokens.tokens.backend as string, openapi);
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('a signed report on the scanning port revokes; the management API, the console and the proxy are not there, and the management port no longer takes reports', async () => {
    expect(gate.scanningUrl).toBeDefined();
    const scanning = gate.scanningUrl as string;
    const made = (
      await writer.call('POST', '/v1/keys', { json: { owner: 'acme', scopes: ['accounts:read'] } })
    ).json() as Made;
    const text = JSON.stringify([
      { token: made.apiSecret, type: 'keygate_secret', url: 'https://github.com/o/r', source: 'content' },
    ]);
    const headers = {
      'content-type': 'application/json',
      'github-public-key-identifier': ID_1,
      'github-public-key-signature': signed(text, github1.privateKey),
    };
    // The management port serves the API, not the reports.
    const onManagement = await send(gate.managementUrl as string, '/v1/secret-scanning/github', {
      method: 'POST',
      headers,
      body: text,
    });
    expect(onManagement.status).toBe(404);
    const r = await send(scanning, '/v1/secret-scanning/github', { method: 'POST', headers, body: text });
    expect(r.status).toBe(200);
    expect((r.json() as { label: string }[])[0]?.label).toBe('true_positive');
    expect((await gate.keygate.store.getKey(made.apiKey))?.state).toBe('revoked');
    // Nothing else answers there, with or without a management token.
    const token = { authorization: `Bearer ${writeToken}` };
    for (const path of [
      '/v1/keys',
      '/v1/whoami',
      '/v1/openapi.json',
      '/v1/audit',
      '/console/',
      '/',
      '/api/v3/time',
      '/metrics',
    ])
      expect([path, (await send(scanning, path, { headers: token })).status]).toEqual([path, 404]);
    expect((await send(scanning, '/v1/secret-scanning/github')).status).toBe(405);
  });
});
