import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startInstancePair, type InstancePair } from '../helpers/instance-pair.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';

const SECRET = 'metering-secret-0123456789';
const HEAVY_PATH = '/api/v3/depth';
const TOO_MANY = { code: 10429, message: 'Too Many Requests' };

/**
 * Issue 42 over the wire: two Keygate instances on one real Redis, before one recording upstream.
 * Route cost, an owner's budget shared by its keys, and the failed-authentication budget per IP,
 * each decided in the one admit step (or, for the IP, before it) and shared by both instances.
 * Client IPs are real: requests are sent from 127.0.0.x source addresses.
 */
describe('metering across two instances: route cost, owner budgets, failed-authentication budget per IP', () => {
  let pair: InstancePair;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-metering-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `  - { method: GET, path: ${HEAVY_PATH}, scopes: [accounts:read], cost: 5 }`,
        'defaultOwnerRateLimit: { rate: 12/h }',
        'failedAuthLimit: { rate: 10/h, burst: 10 }',
        '',
      ].join('\n'),
    );
    pair = await startInstancePair({
      keys: [
        makeKey({ apiKey: 'heavy', secret: SECRET, rateLimit: { rate: '50/h', burst: 50 } }),
        makeKey({ apiKey: 'acme-1', secret: SECRET, owner: 'acme' }),
        makeKey({ apiKey: 'acme-2', secret: SECRET, owner: 'acme' }),
        makeKey({ apiKey: 'other-1', secret: SECRET, owner: 'other' }),
        makeKey({ apiKey: 'good', secret: SECRET }),
      ],
      env: { KEYGATE_CONFIG: policy, KEYGATE_KEY_CACHE_TTL_MS: '600000' },
    });
  });
  afterAll(async () => {
    await pair?.close();
  });

  const call = (gate: RunningKeygate, path: string, t: string, from = '127.0.0.1') =>
    send(gate.url, path, { headers: bearer(t), from });
  const forwarded = (apiKey: string) =>
    pair.upstream.received.filter((r) => r.headers['x-api-key-id'] === `id-${apiKey}`).length;
  /**
   * The other instance hears of a block through the `ip-blocks` channel (ip-budget.ts), a message that can
   * arrive a moment after the refusal that spent the last unit was answered. Wait until it has: a request
   * without a token from `ip` is refused 429 ip_blocked there (before that, 401, which spends nothing: no credential).
   */
  const heardBlock = (gate: RunningKeygate, ip: string) =>
    expect.poll(async () => (await send(gate.url, ACCOUNTS_PATH, { from: ip })).status, { timeout: 10_000 }).toBe(429);
  const expectTooMany = (r: Reply) => {
    expect(r.status).toBe(429);
    expect(r.json()).toEqual(TOO_MANY);
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  };

  it('a key of 50/h burst 50 on a route of cost 5 admits exactly 10 across both instances, then 429; RateLimit counts cost units', async () => {
    const replies: Reply[] = [];
    for (let i = 0; i < 12; i++)
      replies.push(await call(i % 2 ? pair.b : pair.a, HEAVY_PATH, token('heavy', SECRET), '127.0.0.11'));
    expect(replies.slice(0, 10).map((r) => r.status)).toEqual(Array(10).fill(200));
    expect(replies[0]?.headers['ratelimit-policy']).toBe('"keygate";q=50;w=3600');
    // Real time passes between requests (a few seconds on a loaded machine): t is read as a range.
    const t = (r: Reply | undefined, budget: string, left: number) => {
      const m = new RegExp(`^"${budget}";r=${left};t=(\\d+)$`).exec(String(r?.headers.ratelimit));
      return Number(m?.[1] ?? NaN);
    };
    expect(t(replies[0], 'keygate', 45)).toBe(360);
    expect(t(replies[9], 'keygate', 0)).toBeGreaterThan(3_500);
    for (const r of replies.slice(10)) {
      expectTooMany(r);
      // 5 units at 72 s each, less the time the test took (the first units came back meanwhile)
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(250);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(360);
    }
    expect(forwarded('heavy')).toBe(10);
  });

  it('two keys of one owner limited to 12/h admit exactly 12 between them across both instances; another owner is untouched', async () => {
    const statuses: number[] = [];
    let refused: Reply | undefined;
    const started = Date.now();
    for (let i = 0; i < 16; i++) {
      const r = await call(i % 2 ? pair.b : pair.a, ACCOUNTS_PATH, token(i % 4 < 2 ? 'acme-1' : 'acme-2', SECRET));
      statuses.push(r.status);
      if (r.status !== 200) refused ??= r;
    }
    expect(statuses).toEqual([...Array(12).fill(200), ...Array(4).fill(429)]);
    expect(forwarded('acme-1') + forwarded('acme-2')).toBe(12);
    expectTooMany(refused as Reply);
    expect(refused?.headers['ratelimit-policy']).toBe('"keygate-owner";q=12;w=3600');
    // Full again 12 × 300 s after the first admission: 3600 s less what this test has taken (whole seconds, rounded up).
    const t = /^"keygate-owner";r=0;t=(\d+)$/.exec(String(refused?.headers.ratelimit))?.[1];
    expect(Number(t)).toBeLessThanOrEqual(3600);
    expect(Number(t)).toBeGreaterThanOrEqual(3600 - Math.ceil((Date.now() - started) / 1000));
    const other = await call(pair.b, ACCOUNTS_PATH, token('other-1', SECRET));
    expect(other.status).toBe(200);
    expect(other.headers.ratelimit).toBe('"keygate-owner";r=11;t=300');
    // The refusals were logged as the owner's budget, not the key's.
    await expect
      .poll(async () => (await send(pair.a.adminUrl, '/metrics')).body)
      .toMatch(/keygate_auth_rejections_total\{code="10429",reason="owner_rate_limited"\} [1-9]/);
  });

  it('10 forged tokens from one IP: then a valid token from that IP gets 429 ip_blocked on the other instance, from another IP 200', async () => {
    for (let i = 0; i < 10; i++) {
      const r = await call(pair.a, ACCOUNTS_PATH, token('good', 'not-the-secret-0123456789'), '127.0.0.21');
      expect(r.status).toBe(401);
      expect(r.json()).toMatchObject({ code: 40106 });
    }
    const before = pair.upstream.received.length;
    await heardBlock(pair.b, '127.0.0.21');
    const blocked = await call(pair.b, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.21');
    expectTooMany(blocked);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(300); // one failure back per 6 min
    expect(blocked.headers['ratelimit-policy']).toBe('"keygate-ip";q=10;w=3600');
    // t is until the whole burst is back (docs/keys.md): the next failure's 6 min and 9 more, not the first alone.
    const t = Number(/^"keygate-ip";r=0;t=(\d+)$/.exec(String(blocked.headers.ratelimit))?.[1]);
    expect(t).toBeGreaterThan(3_000);
    expect(t).toBeLessThanOrEqual(3_600);
    expect((await call(pair.a, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.21')).status).toBe(429);
    expect((await call(pair.b, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.22')).status).toBe(200);
    expect(pair.upstream.received.length).toBe(before + 1);
    await expect
      .poll(async () => (await send(pair.b.adminUrl, '/metrics')).body)
      .toMatch(/keygate_auth_rejections_total\{code="10429",reason="ip_blocked"\} [1-9]/);
  });

  it('unknown-key probes spend the IP budget too', async () => {
    for (let i = 0; i < 10; i++) {
      const probe = await call(i % 2 ? pair.a : pair.b, ACCOUNTS_PATH, token(`probe-${i}`, SECRET), '127.0.0.31');
      expect(probe.json()).toMatchObject({ code: 10013 });
    }
    await heardBlock(pair.b, '127.0.0.31');
    expectTooMany(await call(pair.b, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.31'));
    expectTooMany(await call(pair.a, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.31'));
  });

  it('30 requests without a credential (no Authorization, or an empty one) spend nothing: a valid token from that IP then passes', async () => {
    // What any web page can make its visitors' browsers send (<img> tags, preflights): they must not block the visitor.
    for (let i = 0; i < 30; i++) {
      const headers = i % 3 === 0 ? { authorization: '' } : {};
      const r = await send((i % 2 ? pair.a : pair.b).url, ACCOUNTS_PATH, { headers, from: '127.0.0.41' });
      expect(r.status).toBe(401);
      expect(r.json()).toMatchObject({ code: 40004 });
    }
    for (const gate of [pair.a, pair.b])
      expect((await call(gate, ACCOUNTS_PATH, token('good', SECRET), '127.0.0.41')).status).toBe(200);
    // A token that is presented and fails still spends, as before: 10 forged ones block the IP.
    for (let i = 0; i < 10; i++)
      expect((await call(pair.a, ACCOUNTS_PATH, token('good', 'not-the-secret-0123456789'), '127.0.0.41')).status).toBe(
        401,
      );
    await heardBlock(pair.b, '127.0.0.41');
  });
});

describe('IP blocks stay inside their deployment: two deployments on two databases of one Redis', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  const gates: RunningKeygate[] = [];
  afterAll(async () => {
    for (const g of gates) await g.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('failures against deployment A (db 1) block the IP on both of its instances, never on deployment B (db 2)', async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-two-dbs-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        'failedAuthLimit: { rate: 10/h, burst: 3 }',
        '',
      ].join('\n'),
    );
    const env = { KEYGATE_CONFIG: policy };
    const keys = [makeKey({ apiKey: 'good', secret: SECRET })];
    const start = (db: number, withKeys: boolean) =>
      startKeygate({ upstream: upstream.url, redisUrl: `${redis.url}/${db}`, env, ...(withKeys && { keys }) });
    const a1 = await start(1, true);
    gates.push(a1);
    const a2 = await start(1, false);
    gates.push(a2);
    const b = await start(2, true);
    gates.push(b);
    for (let i = 0; i < 3; i++)
      expect(
        (await send(a1.url, ACCOUNTS_PATH, { headers: bearer(token('good', 'forged-0123456789')), from: '127.0.0.51' }))
          .status,
      ).toBe(401);
    // Deployment A's other instance hears the block on A's channel...
    await expect
      .poll(async () => (await send(a2.url, ACCOUNTS_PATH, { from: '127.0.0.51' })).status, { timeout: 10_000 })
      .toBe(429);
    // ...and deployment B, on the same Redis server, heard nothing: its clients from that IP pass.
    expect(
      (await send(b.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)), from: '127.0.0.51' })).status,
    ).toBe(200);
    expect(
      (await send(b.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)), from: '127.0.0.51' })).status,
    ).toBe(200);
  });
});
