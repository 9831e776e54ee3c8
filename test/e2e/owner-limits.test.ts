import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisKeyStore } from '../../src/cli/keys/open-key-store.js';
import { ACCOUNTS_PATH, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { runCli } from '../helpers/cli-run.js';

const SECRET = 'owner-limits-secret-0123456789';
const HEAVY_PATH = '/api/v3/depth';

/**
 * Issue 42, owners' own limits over the wire: two Keygate instances on one real Redis. An owner's
 * limit set with `keygate owners set` (in-process main(), as bin/keygate.js calls it) or with
 * PUT /v1/owners/{owner} is one budget for all its keys on every instance, and takes precedence over
 * the policy's defaultOwnerRateLimit (here 1000/h, which would admit every request of this file).
 */
describe("owners' own limits: keygate owners and /v1/owners/{owner}, two instances on one Redis", () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let writer: ManagementClient;
  let reader: ManagementClient;
  let onB: ManagementClient;
  let policyFile: string;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-owner-limits-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `  - { method: GET, path: ${HEAVY_PATH}, scopes: [accounts:read], cost: 5 }`,
        'defaultOwnerRateLimit: { rate: 1000/h }',
        '',
      ].join('\n'),
    );
    const tokens = writeTokensFile([
      { name: 'settings-backend', access: 'write' },
      { name: 'auditor', access: 'read' },
    ]);
    // A long cache TTL: an owner's new limit reaches the other instance only because it is published.
    const env = {
      KEYGATE_CONFIG: policy,
      KEYGATE_KEY_CACHE_TTL_MS: '600000',
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
    };
    policyFile = policy;
    const keys = ['acme-1', 'acme-2', 'other-1', 'beta-1', 'mover-1', 'tiny-1', 'raise-1', 'reborn-1'].map((apiKey) =>
      makeKey({ apiKey, secret: SECRET, owner: apiKey.split('-')[0] }),
    );
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env, keys });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    const openapi = createOpenApiCheck();
    writer = managementClient(a.managementUrl as string, tokens.tokens['settings-backend'] as string, openapi);
    reader = managementClient(a.managementUrl as string, tokens.tokens.auditor as string, openapi);
    onB = managementClient(b.managementUrl as string, tokens.tokens['settings-backend'] as string, openapi);
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const owners = (...args: string[]) => cli('owners', ...args);
  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    return runCli(args, {
      env: { KEYGATE_REDIS_URL: redis.url, KEYGATE_ACTOR: 'owner-test', KEYGATE_CONFIG: policyFile },
      openKeyStore: openRedisKeyStore,
    });
  }
  const call = (gate: RunningKeygate, apiKey: string) =>
    send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, SECRET)) });

  it('keygate owners set acme --rate-limit 12/h: two keys of acme admit exactly 12 between them across both instances, then 429 owner_rate_limited; another owner is untouched', async () => {
    const set = await owners('set', 'acme', '--rate-limit', '12/h', '--burst', '12', '--json');
    expect(set.err).toBe('');
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out)).toMatchObject({ owner: 'acme', rateLimit: { rate: '12/h', burst: 12 } });
    const shown = await owners('show', 'acme');
    expect(shown.out).toBe('acme  12/h burst 12\n  left now: 12 of 12, whole again in 0 s\n');
    // Both instances hear the change message (no request needed to learn it).
    await expect
      .poll(() => [a, b].map((g) => g.keygate.store.ownerLimit('acme')?.burst), PUBLISHED_WITHIN)
      .toEqual([12, 12]);

    const replies: Reply[] = [];
    for (let i = 0; i < 14; i++) replies.push(await call(i % 2 ? b : a, i % 4 < 2 ? 'acme-1' : 'acme-2'));
    expect(replies.map((r) => r.status)).toEqual([...Array(12).fill(200), 429, 429]);
    // The owner's own policy is listed beside nothing else (the keys have no limit of their own).
    expect(replies[0]?.headers['ratelimit-policy']).toBe('"keygate-owner";q=12;w=3600');
    expect(Number(replies[12]?.headers['retry-after'])).toBeGreaterThan(200);
    await expect.poll(() => a.logs.concat(b.logs).some((l) => l.includes('"reason":"owner_rate_limited"'))).toBe(true);
    // Another owner: the policy's default (1000/h) still applies to it.
    for (const g of [a, b]) expect((await call(g, 'other-1')).status).toBe(200);
    // What is left, as the console shows it: acme's own budget spent, other's under the policy default.
    const acme = (await reader.call('GET', '/v1/owners/acme')).json() as { budget: Record<string, unknown> };
    expect(acme.budget).toMatchObject({ source: 'owner', burst: 12, remaining: 0 });
    expect(acme.budget.resetSeconds).toBeGreaterThan(3_500);
    const other = (await reader.call('GET', '/v1/owners/other')).json() as { budget: Record<string, unknown> };
    expect(other.budget).toMatchObject({ source: 'policy', burst: 1000, remaining: 998 });
  });

  it('PUT /v1/owners/{owner} on one instance limits the owner on the other; GET shows it to any token; a read token cannot set', async () => {
    expect((await reader.call('PUT', '/v1/owners/beta', { json: { rateLimit: { rate: '2/h' } } })).status).toBe(403);
    const put = await onB.call('PUT', '/v1/owners/beta', { json: { rateLimit: { rate: '2/h' } } });
    expect(put.status).toBe(200);
    expect(put.json()).toMatchObject({ owner: 'beta', rateLimit: { rate: '2/h' } });
    const got = await reader.call('GET', '/v1/owners/beta');
    expect(got.json()).toMatchObject({ owner: 'beta', rateLimit: { rate: '2/h' } });
    await expect.poll(() => a.keygate.store.ownerLimit('beta')?.burst, PUBLISHED_WITHIN).toBe(2);
    expect((await call(a, 'beta-1')).status).toBe(200);
    expect((await call(b, 'beta-1')).status).toBe(200);
    expect((await call(a, 'beta-1')).status).toBe(429);

    const bad = await writer.call('PUT', '/v1/owners/beta', { json: { rateLimit: { rate: 'lots' } } });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json())).toContain('body.rateLimit.rate');
    expect((await writer.call('PUT', '/v1/owners/beta', { json: {} })).status).toBe(400);
    expect((await writer.call('GET', '/v1/owners/not%20an%20owner')).status).toBe(404);
    // An owner never set: 200 with no limit of its own.
    expect((await reader.call('GET', '/v1/owners/nobody')).json()).toMatchObject({
      owner: 'nobody',
      rateLimit: null,
      updatedAt: null,
      budget: { source: 'policy', burst: 1000, remaining: 1000, resetSeconds: 0 },
    });
  });

  it('keygate owners list shows the owners with a limit; --rate-limit none removes one (on every instance)', async () => {
    const listed = await owners('list', '--json');
    expect((JSON.parse(listed.out) as Array<{ owner: string }>).map((o) => o.owner)).toEqual(['acme', 'beta']);
    const removed = await owners('set', 'beta', '--rate-limit', 'none', '--json');
    expect(JSON.parse(removed.out)).toEqual({ owner: 'beta', rateLimit: null, credits: null, updatedAt: null });
    await expect.poll(() => b.keygate.store.ownerLimit('beta'), PUBLISHED_WITHIN).toBeUndefined();
    expect((await owners('list')).out).toBe('acme  12/h burst 12\n');
    // Usage errors: exit 2.
    expect((await owners('set', 'beta')).code).toBe(2);
    expect((await owners('set', 'beta', '--rate-limit', 'none', '--burst', '3')).code).toBe(2);
    expect((await owners('set', 'bad name', '--rate-limit', '1/s')).code).toBe(2);
  });

  it("an import --replace cannot move a key to another owner: its nonces live in its owner's slot, so a used token would pass again", async () => {
    // Used once (nonces of an owned key live under {owner:mover}).
    const used = token('mover-1', SECRET);
    upstream.reset();
    expect((await send(a.url, ACCOUNTS_PATH, { headers: bearer(used) })).status).toBe(200);
    // The same key (same apiKey, id and secret) under another owner.
    const dir = mkdtempSync(join(tmpdir(), 'keygate-owner-move-'));
    const file = join(dir, 'keys.json');
    const moved = makeKey({ apiKey: 'mover-1', secret: SECRET, owner: 'elsewhere' });
    writeFileSync(file, JSON.stringify({ keys: [{ ...moved, apiSecret: SECRET, secret: undefined }] }));
    const imported = await cli('keys', 'import', file, '--replace');
    // Had the import moved it, wait until instance a serves the key under its new owner; then replay the used token.
    if (imported.code === 0)
      await expect
        .poll(async () => {
          await send(a.url, ACCOUNTS_PATH, { headers: bearer(token('mover-1', SECRET)) });
          return upstream.received.at(-1)?.headers['x-api-key-owner'];
        }, PUBLISHED_WITHIN)
        .toBe('elsewhere');
    for (const gate of [a, b]) {
      const replay = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(used) });
      expect(replay.status).toBe(401);
      expect(replay.json()).toMatchObject({ code: 40106 });
    }
    // The used token reached the upstream once: its first use (Keygate never forwards Authorization).
    expect(upstream.received.map((r) => r.headers['x-api-key-owner'])).toEqual(['mover']);
    expect(imported.code).toBe(1);
    expect(imported.err).toContain('mover-1');
    expect(imported.err).toContain('owner');
  });

  it('a burst below a route cost: PUT and owners set warn; a request that can never fit is 429 cost_exceeds_burst without Retry-After', async () => {
    const put = await writer.call('PUT', '/v1/owners/tiny', { json: { rateLimit: { rate: '10/s', burst: 2 } } });
    expect(put.status).toBe(200);
    const { warnings } = put.json() as { warnings: string[] };
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('burst 2 is below the cost 5 of route /api/v3/depth');
    // A burst that holds the costliest route: no warning.
    const fits = await writer.call('PUT', '/v1/owners/beta', { json: { rateLimit: { rate: '1/s', burst: 5 } } });
    expect(fits.json()).toMatchObject({ warnings: [] });
    const set = await owners('set', 'tiny', '--rate-limit', '10/s', '--burst', '3');
    expect(set.code).toBe(0);
    expect(set.out).toBe('tiny  10/s burst 3\n');
    expect(set.err).toMatch(/^warning: owner tiny: burst 3 is below the cost 5 of route \/api\/v3\/depth .*\n$/);
    await expect
      .poll(() => [a, b].map((g) => g.keygate.store.ownerLimit('tiny')?.burst), PUBLISHED_WITHIN)
      .toEqual([3, 3]);

    upstream.reset();
    for (const gate of [a, b]) {
      const r = await send(gate.url, HEAVY_PATH, { headers: bearer(token('tiny-1', SECRET)) });
      expect(r.status).toBe(429);
      // "Never", told apart from "later" by the message, and by no Retry-After: waiting would never help.
      expect(r.json()).toEqual({ code: 10429, message: 'Request cost exceeds burst' });
      expect(r.headers['retry-after']).toBeUndefined();
      // The RateLimit fields every 429 has: the budget (q=3 < the cost 5) and where it stands (nothing spent).
      expect(r.headers['ratelimit-policy']).toBe('"keygate-owner";q=3;w=1');
      expect(r.headers.ratelimit).toMatch(/^"keygate-owner";r=3;t=[01]$/);
    }
    expect(upstream.received).toHaveLength(0);
    // Nothing was spent: the cheap route still has the whole burst.
    expect((await call(a, 'tiny-1')).headers.ratelimit).toBe('"keygate-owner";r=2;t=1');
    await expect.poll(() => a.logs.concat(b.logs).some((l) => l.includes('"reason":"cost_exceeds_burst"'))).toBe(true);
    expect((await send(a.adminUrl, '/metrics')).body).toMatch(
      /keygate_auth_rejections_total\{code="10429",reason="cost_exceeds_burst"\} [1-9]/,
    );
  });

  it('raising a limit takes effect at once: the budget spent under 1/h admits again within 1 s of a raise to 10/s', async () => {
    expect((await owners('set', 'raise', '--rate-limit', '1/h')).code).toBe(0);
    await expect
      .poll(() => [a, b].map((g) => g.keygate.store.ownerLimit('raise')?.burst), PUBLISHED_WITHIN)
      .toEqual([1, 1]);
    expect((await call(a, 'raise-1')).status).toBe(200);
    const limited = await call(b, 'raise-1');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(3_000); // the old rate: an hour's wait
    expect((await owners('set', 'raise', '--rate-limit', '10/s')).code).toBe(0);
    await expect
      .poll(() => [a, b].map((g) => g.keygate.store.ownerLimit('raise')?.burst), PUBLISHED_WITHIN)
      .toEqual([10, 10]);
    // The old rate's debt is clamped to the new burst: at most a whole burst of 10/s (1 s) to wait, not 3,600 s.
    const first = await call(a, 'raise-1');
    expect(first.status === 200 || Number(first.headers['retry-after']) <= 1).toBe(true);
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await call(b, 'raise-1')).status).toBe(200);
    expect((await call(a, 'raise-1')).status).toBe(200);
  });

  it('a key deleted and imported again under another owner is refused while its nonces live: a used token never passes again', async () => {
    const used = token('reborn-1', SECRET);
    expect((await send(a.url, ACCOUNTS_PATH, { headers: bearer(used) })).status).toBe(200);
    expect((await cli('keys', 'delete', 'reborn-1')).code).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'keygate-owner-reborn-'));
    const fileFor = (owner: string) => {
      const file = join(dir, `${owner}.json`);
      const k = makeKey({ apiKey: 'reborn-1', secret: SECRET, owner });
      writeFileSync(file, JSON.stringify({ keys: [{ ...k, apiSecret: SECRET, secret: undefined }] }));
      return file;
    };
    const elsewhere = await cli('keys', 'import', fileFor('elsewhere'));
    expect(elsewhere.code).toBe(1);
    expect(elsewhere.err).toContain('reborn-1 was deleted less than');
    expect(elsewhere.err).toContain('"reborn"');
    // Under its old owner it may come back: its nonces are where they were, so the used token is still a replay.
    expect((await cli('keys', 'import', fileFor('reborn'))).code).toBe(0);
    await expect
      .poll(
        async () => (await send(b.url, ACCOUNTS_PATH, { headers: bearer(token('reborn-1', SECRET)) })).status,
        PUBLISHED_WITHIN,
      )
      .toBe(200);
    for (const gate of [a, b]) {
      const replay = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(used) });
      expect(replay.status).toBe(401);
      expect(replay.json()).toMatchObject({ code: 40106 });
    }
  });
});

describe('an owner change always arrives: a read that a busy Redis refuses is retried', () => {
  const closers: Array<() => Promise<unknown>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  it("the instance whose read of the owner failed (BUSY: a long script) answers 503 for the owner's keys meanwhile, then applies the new limit", async () => {
    // Redis answers BUSY to every other client once a script has run for 100 ms.
    const redis = await startRedis({ args: ['--busy-reply-threshold', '100'] });
    closers.push(() => redis.stop());
    const upstream = await startRecordingUpstream();
    closers.push(() => upstream.close());
    const dir = mkdtempSync(join(tmpdir(), 'keygate-owner-busy-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }\n`);
    // A long cache TTL: the key stays cached on b, so only the owner's change message can bring the new limit.
    const env = { KEYGATE_CONFIG: policy, KEYGATE_KEY_CACHE_TTL_MS: '600000' };
    const keys = [makeKey({ apiKey: 'slow-1', secret: SECRET, owner: 'slow' })];
    const a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env, keys });
    closers.push(() => a.close());
    const b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    closers.push(() => b.close());
    await a.keygate.store.putOwner({ owner: 'slow', rateLimit: { rate: '1/h' } }, undefined);
    await expect.poll(() => b.keygate.store.ownerLimit('slow')?.burst, PUBLISHED_WITHIN).toBe(1);
    const call = () => send(b.url, ACCOUNTS_PATH, { headers: bearer(token('slow-1', SECRET)) });
    expect((await call()).status).toBe(200);
    expect((await call()).status).toBe(429); // the hour's one request is spent

    // The new limit and its change message, written by a script that then keeps Redis busy for 1.5 s:
    // b hears the message and its read of the owner is answered BUSY.
    const raw = new Redis(redis.url);
    closers.push(() => raw.quit());
    const settings = JSON.stringify({ rateLimit: { rate: '10/s', burst: 10 }, updatedAt: new Date().toISOString() });
    const busy = raw.eval(
      `redis.call('HSET', KEYS[1], 'slow', ARGV[1])
       redis.call('PUBLISH', KEYS[2], 'owner:slow')
       local t = redis.call('TIME')
       local start = tonumber(t[1]) * 1000000 + tonumber(t[2])
       while true do
         local n = redis.call('TIME')
         if tonumber(n[1]) * 1000000 + tonumber(n[2]) - start > 1500000 then break end
       end
       return 1`,
      2,
      'keygate:{keystore}:owners',
      'keygate:key-events',
      settings,
    );
    await expect
      .poll(() => b.logs.some((l) => l.includes("owner's changed limit could not be read")), { timeout: 10_000 })
      .toBe(true);
    // Unknown meanwhile: refused as Redis being unavailable is, never admitted or limited under the old limit.
    const during = await call();
    expect([503, 200]).toContain(during.status);
    await busy;
    // Retried until it succeeds: the raise applies on b (its old debt clamped to the new burst).
    await expect.poll(async () => (await call()).status, PUBLISHED_WITHIN).toBe(200);
    expect(b.keygate.store.ownerLimit('slow')?.burst).toBe(10);
  });
});
