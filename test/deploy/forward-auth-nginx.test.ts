import { mkdtempSync, writeFileSync } from 'node:fs';
import type { OutgoingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS, type ErrorCode } from '../../src/errors.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, waitStoreReady, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startNginx, type RunningNginx } from '../helpers/nginx.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { claims, nowNonce, sign, HS256, token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';

const SECRET = 'plain-secret-0123456789abcdef';
const KEYS: KeyRecord[] = [
  makeKey({ apiKey: 'good', secret: SECRET, id: 'key-good' }),
  makeKey({ apiKey: 'noscope', secret: SECRET, scopes: ['other:read'] }),
  makeKey({ apiKey: 'faraway', secret: SECRET, allowIps: ['10.0.0.0/8'] }),
  makeKey({ apiKey: 'revoked', secret: SECRET, state: 'revoked', revokedAt: '2026-01-01T00:00:00Z' }),
];
const ok =
  (apiKey: string, extra: Record<string, unknown> = {}) =>
  () =>
    bearer(token(apiKey, SECRET, extra));

interface Row {
  name: string;
  headers: () => OutgoingHttpHeaders;
  code: ErrorCode;
  path?: string;
}

/**
 * Every row of the seed's error table (and Keygate's own refusals a client can provoke), through
 * the shipped nginx config: the client must get the seed's status, code and body exactly.
 */
const ROWS: Row[] = [
  { name: '40004 no Authorization header', headers: () => ({}), code: 40004 },
  { name: '40106 bad signature', headers: () => bearer(token('good', 'another-secret-0123456789')), code: 40106 },
  { name: '40106 malformed token', headers: () => bearer('not-a-jwt'), code: 40106 },
  {
    name: '40106 nonce outside recv_window',
    headers: () => bearer(token('good', SECRET, { nonce: nowNonce(-31_000) })),
    code: 40106,
  },
  {
    name: '40106 secret Base64-encoded before signing',
    headers: () => bearer(token('good', Buffer.from(SECRET).toString('base64'))),
    code: 40106,
  },
  {
    name: '40107 two spaces after Bearer',
    headers: () => ({ authorization: `Bearer  ${token('good', SECRET)}` }),
    code: 40107,
  },
  { name: '40107 Basic scheme', headers: () => ({ authorization: 'Basic Zm9vOmJhcg==' }), code: 40107 },
  { name: '10403 key lacks the scope', headers: ok('noscope'), code: 10403 },
  { name: '10403 caller IP not on the allow-list', headers: ok('faraway'), code: 10403 },
  { name: '10013 unknown key', headers: ok('nobody'), code: 10013 },
  { name: '10013 revoked key', headers: ok('revoked'), code: 10013 },
  { name: '40400 path outside /api/v3/', headers: ok('good'), code: 40400, path: '/internal/admin' },
  { name: '40000 encoded dot-dot', headers: ok('good'), code: 40000, path: '/api/v3/%2e%2e/admin' },
];

describe('forward-auth behind real nginx (deploy/nginx/forward-auth.conf as shipped)', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  let nginx: RunningNginx;
  /** Real answers, printed once at the end (the closing note pastes them). */
  const answers: string[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-fa-nginx-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\npublic:\n  - { method: GET, path: /public/* }\ntrustedProxies: [127.0.0.1/32]\n`,
    );
    kg = await startKeygate({
      upstream: 'http://unused.invalid',
      redisUrl: redis.url,
      keys: KEYS,
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: policy },
    });
    nginx = await startNginx(kg.url, upstream.url);
  }, guard(30_000));

  afterAll(async () => {
    if (answers.length > 0) console.log(`[forward-auth-nginx] real answers through nginx:\n${answers.join('\n')}`);
    await nginx?.stop();
    await kg?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it.each(ROWS)(
    '$name: the seed status, code and body reach the client, nothing reaches the upstream',
    async ({ headers, code, path }) => {
      const before = upstream.received.length;
      const r = await send(nginx.url, path ?? ACCOUNTS_PATH, { headers: headers() });
      answers.push(`${(path ?? ACCOUNTS_PATH).padEnd(26)} ${r.status} ${r.body}`);
      expect(r.status).toBe(ERRORS[code].status);
      expect(r.body).toBe(JSON.stringify({ code, message: ERRORS[code].message }));
      expect(r.headers['content-type']).toBe('application/json');
      // As in proxy mode: the code is in the body only, and a challenge only on 401.
      expect(r.headers['x-keygate-code']).toBeUndefined();
      expect(r.rawHeaders.filter((h) => h.toLowerCase() === 'www-authenticate')).toHaveLength(r.status === 401 ? 1 : 0);
      expect(upstream.received.length).toBe(before);
    },
  );

  it('a nonce outside recv_window also carries the server time, as in proxy mode', async () => {
    const r = await send(nginx.url, ACCOUNTS_PATH, {
      headers: bearer(token('good', SECRET, { nonce: nowNonce(-31_000) })),
    });
    expect(r.status).toBe(401);
    expect(r.headers['x-server-time']).toMatch(/^\d{19}$/);
  });

  it('a valid token reaches the upstream with exactly one X-Api-Key-Id, never the client copy; the same token again is refused', async () => {
    const before = upstream.received.length;
    const t = token('good', SECRET);
    const r = await send(nginx.url, `${ACCOUNTS_PATH}?page=2`, {
      headers: { ...bearer(t), 'x-api-key-id': 'forged', 'X-API-KEY-ID': 'forged-2' },
    });
    answers.push(`valid token               ${r.status} ${r.body}`);
    expect(r.status).toBe(200);
    expect(upstream.received.length).toBe(before + 1);
    const got = upstream.received.at(-1)!;
    expect(got.url).toBe(`${ACCOUNTS_PATH}?page=2`);
    const ids = got.rawHeaders.filter((_, i) => i % 2 === 0 && got.rawHeaders[i]!.toLowerCase() === 'x-api-key-id');
    expect(ids).toHaveLength(1);
    expect(got.headers['x-api-key-id']).toBe('key-good');
    expect(got.headers['x-request-id']).toMatch(/^[0-9a-f]{32}$/);

    const again = await send(nginx.url, `${ACCOUNTS_PATH}?page=2`, { headers: bearer(t) });
    answers.push(`same token again          ${again.status} ${again.body}`);
    expect(again.status).toBe(401);
    expect(again.body).toBe('{"code":40106,"message":"Invalid Token"}');
    expect(upstream.received.length).toBe(before + 1);
  });

  it('the check and the upstream see the same request id, and the outcome is logged once per request', async () => {
    const before = kg.logs.length;
    const r = await send(nginx.url, ACCOUNTS_PATH, { headers: bearer('not-a-jwt') });
    expect(r.status).toBe(401);
    const lines = kg.logs
      .slice(before)
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === 'request');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      code: 40106,
      reason: 'malformed',
      method: 'GET',
      route: ACCOUNTS_PATH,
      status: 401,
    });
    expect(r.headers['x-request-id']).toBe(lines[0]!.requestId);
  });

  it('50 concurrent copies of one token: exactly one reaches the upstream', async () => {
    const before = upstream.received.length;
    const t = sign(HS256, claims('good'), SECRET);
    const replies = await Promise.all(
      Array.from({ length: 50 }, () => send(nginx.url, ACCOUNTS_PATH, { headers: bearer(t) })),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    expect(statuses.filter((s) => s === 401)).toHaveLength(49);
    for (const r of replies.filter((x) => x.status === 401))
      expect(r.body).toBe('{"code":40106,"message":"Invalid Token"}');
    expect(upstream.received.length).toBe(before + 1);
  });

  it("public routes pass without a token and without any X-Api-Key-Id; the clock endpoint is Keygate's", async () => {
    const before = upstream.received.length;
    const r = await send(nginx.url, '/public/x', { headers: { 'x-api-key-id': 'forged' } });
    expect(r.status).toBe(200);
    expect(upstream.received.length).toBe(before + 1);
    expect(upstream.received.at(-1)!.headers['x-api-key-id']).toBeUndefined();

    const time = await send(nginx.url, '/api/v3/time');
    expect(time.status).toBe(200);
    expect((time.json() as { serverTime: string }).serverTime).toMatch(/^\d{19}$/);
    expect(upstream.received.length).toBe(before + 1);
  });

  it(
    'Redis down: 503 50300 through nginx, nothing forwarded; back up: served again',
    async () => {
      const before = upstream.received.length;
      await redis.kill();
      try {
        const r = await send(nginx.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) });
        answers.push(`Redis down                ${r.status} ${r.body}   retry-after: ${r.headers['retry-after']}`);
        expect(r.status).toBe(503);
        expect(r.body).toBe('{"code":50300,"message":"Service unavailable"}');
        expect(upstream.received.length).toBe(before);
      } finally {
        await redis.start();
      }
      // The restarted server is empty: put the keys back, as an operator's import would.
      await waitStoreReady(kg.keygate.store);
      for (const k of KEYS) await kg.keygate.store.putKey(k);
      const deadline = Date.now() + 10_000;
      let status = 0;
      while (Date.now() < deadline && status !== 200) {
        status = (await send(nginx.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)) })).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(status).toBe(200);
    },
    guard(20_000),
  );
});
