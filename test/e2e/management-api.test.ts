import { readFileSync, writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/config/management-tokens.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import {
  createOpenApiCheck,
  managementClient,
  writeTokensFile,
  type ManagementClient,
  type TokensFile,
} from '../helpers/management.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';

type Key = {
  apiKey: string;
  id: string;
  owner?: string;
  apiSecret?: string;
  scopes: string[];
  state: string;
  status: string;
};

describe('management API: keys over HTTP, two instances on one Redis', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let tokens: TokensFile;
  let writer: ManagementClient;
  let reader: ManagementClient;
  let onB: ManagementClient;
  const openapi = createOpenApiCheck();
  /** Every token and secret this file used: none may appear in a log line or a metric. */
  const used = new Set<string>();

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    tokens = writeTokensFile([
      { name: 'settings-backend', access: 'write' },
      { name: 'auditor', access: 'read' },
    ]);
    for (const t of Object.values(tokens.tokens)) used.add(t);
    // A long cache TTL: a change is seen within 1 s only because it is published.
    const env = {
      KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
    };
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
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

  const create = async (json: unknown, headers: Record<string, string> = {}) => {
    const r = await writer.call('POST', '/v1/keys', { json, headers });
    const k = r.json() as Key;
    if (k.apiSecret) used.add(k.apiSecret);
    return { r, k };
  };
  const proxied = (gate: RunningKeygate, apiKey: string, secret: string, headers: Record<string, string> = {}) => {
    const t = token(apiKey, secret);
    used.add(t);
    return send(gate.url, ACCOUNTS_PATH, { headers: { ...bearer(t), ...headers } });
  };
  const seen = (r: Reply) => [r.status, r.status >= 400 ? (r.json() as { code: number }).code : 0];

  it('create with an owner: the secret is shown once, a token signed with it passes, the upstream sees X-Api-Key-Id and X-Api-Key-Owner and never a client copy', async () => {
    const { r, k } = await create({ owner: 'acct_42', scopes: ['accounts:read'], label: 'billing job' });
    expect(r.status).toBe(201);
    expect(r.headers.location).toBe(`/v1/keys/${k.apiKey}`);
    expect(k).toMatchObject({ owner: 'acct_42', scopes: ['accounts:read'], state: 'active', status: 'active' });
    expect(k.apiSecret).toMatch(/^kgs_[0-9A-Za-z]{46}$/);
    // Nothing else ever carries it.
    for (const res of [
      await reader.call('GET', `/v1/keys/${k.apiKey}`),
      await reader.call('GET', '/v1/keys?owner=acct_42'),
      await reader.call('GET', `/v1/keys/${k.apiKey}/usage`),
    ]) {
      expect(res.status).toBe(200);
      expect(res.body).not.toContain(k.apiSecret);
      expect(res.body).not.toContain('apiSecret');
    }
    for (const gate of [a, b]) {
      const before = upstream.received.length;
      const res = await proxied(gate, k.apiKey, k.apiSecret as string, {
        'X-Api-Key-Owner': 'acct_forged',
        x_api_key_owner: 'acct_forged2',
        'X.API.KEY.OWNER': 'x',
      });
      expect(res.status).toBe(200);
      const got = upstream.received.slice(before);
      expect(got).toHaveLength(1);
      const raw = got[0]!.rawHeaders;
      const named = (n: string) =>
        raw.filter(
          (_, i) =>
            i % 2 === 0 &&
            raw[i]!.toLowerCase()
              .replace(/[^a-z0-9]/g, '-')
              .startsWith(n),
        ).length;
      expect([
        got[0]!.headers['x-api-key-id'],
        got[0]!.headers['x-api-key-owner'],
        named('x-api-key-owner'),
        named('x-api-key-id'),
      ]).toEqual([k.id, 'acct_42', 1, 1]);
    }
    // A key without an owner: no X-Api-Key-Owner at all, even when the client sends one.
    const { k: plain } = await create({ scopes: ['accounts:read'] });
    const before = upstream.received.length;
    expect(
      (await proxied(b, plain.apiKey, plain.apiSecret as string, { 'X-Api-Key-Owner': 'acct_forged' })).status,
    ).toBe(200);
    expect(upstream.received[before]!.headers['x-api-key-owner']).toBeUndefined();
    // Each instance writes the usage it counted once a second: the reader sees both within that.
    type Usage = { total: number; lastUsedAt: string | null };
    const readUsage = async () => (await reader.call('GET', `/v1/keys/${k.apiKey}/usage?days=2`)).json() as Usage;
    await expect.poll(async () => (await readUsage()).total, { timeout: 5_000 }).toBe(2);
    expect((await readUsage()).lastUsedAt).not.toBeNull();
  });

  it('binding (issue 43): create with binding required refuses plain tokens on both instances; PATCH off lets them in; a bad value is 400', async () => {
    const { r, k } = await create({ scopes: ['accounts:read'], binding: 'required' });
    expect(r.status).toBe(201);
    expect(k).toMatchObject({ binding: 'required' });
    expect((await reader.call('GET', `/v1/keys/${k.apiKey}`)).json()).toMatchObject({ binding: 'required' });
    const secret = k.apiSecret as string;
    for (const gate of [a, b]) {
      expect(seen(await proxied(gate, k.apiKey, secret))).toEqual([401, 40106]);
      const bound = token(k.apiKey, secret, { method: 'GET', path: ACCOUNTS_PATH });
      used.add(bound);
      expect((await send(gate.url, ACCOUNTS_PATH, { headers: bearer(bound) })).status).toBe(200);
    }
    const off = await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { binding: 'off' } });
    expect(off.status).toBe(200);
    expect((off.json() as { binding?: string }).binding).toBeUndefined();
    for (const gate of [a, b]) await expect.poll(async () => (await proxied(gate, k.apiKey, secret)).status).toBe(200);
    const bad = await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { binding: 'maybe' } });
    expect(bad.status).toBe(400);
    expect((bad.json() as { problems: string[] }).problems).toContain('body.binding: must be "off" or "required"');
  });

  it('PATCH the scopes: 403 10403 on both instances within 1 s; revoke: 404 10013 on both within 1 s; delete: 404', async () => {
    const { k } = await create({ owner: 'acct_7', scopes: ['accounts:read'] });
    const secret = k.apiSecret as string;
    for (const gate of [a, b]) expect((await proxied(gate, k.apiKey, secret)).status).toBe(200);
    let t0 = Date.now();
    const patched = await onB.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { scopes: ['orders:read'] } });
    expect([patched.status, (patched.json() as Key).scopes]).toEqual([200, ['orders:read']]);
    for (const gate of [a, b])
      await expect
        .poll(async () => seen(await proxied(gate, k.apiKey, secret)), PUBLISHED_WITHIN)
        .toEqual([403, 10403]);
    expect(Date.now() - t0).toBeLessThan(1_000);
    await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { scopes: ['accounts:read'] } });
    for (const gate of [a, b])
      await expect.poll(async () => (await proxied(gate, k.apiKey, secret)).status, PUBLISHED_WITHIN).toBe(200);
    t0 = Date.now();
    const revoked = await writer.call('POST', `/v1/keys/${k.apiKey}/revoke`, { json: { reason: 'laptop lost' } });
    expect(revoked.json()).toMatchObject({ state: 'revoked', status: 'revoked', revokeReason: 'laptop lost' });
    for (const gate of [a, b])
      await expect
        .poll(async () => seen(await proxied(gate, k.apiKey, secret)), PUBLISHED_WITHIN)
        .toEqual([404, 10013]);
    expect(Date.now() - t0).toBeLessThan(1_000);
    // The state forbids more changes: 409, nothing written.
    for (const [method, path, json] of [
      ['POST', `/v1/keys/${k.apiKey}/revoke`, {}],
      ['POST', `/v1/keys/${k.apiKey}/rotate`, {}],
      ['PATCH', `/v1/keys/${k.apiKey}`, { label: 'x' }],
    ] as const) {
      const r = await writer.call(method, path, { json });
      expect([r.status, (r.json() as { error: string }).error]).toEqual([409, 'conflict']);
    }
    expect((await writer.call('DELETE', `/v1/keys/${k.apiKey}`)).status).toBe(204);
    expect((await reader.call('GET', `/v1/keys/${k.apiKey}`)).status).toBe(404);
    expect((await writer.call('DELETE', `/v1/keys/${k.apiKey}`)).status).toBe(404);
    expect(seen(await proxied(b, k.apiKey, secret))).toEqual([404, 10013]);
  });

  it('rotate with grace: both secrets work on both instances until the grace ends, then only the new one', async () => {
    const { k } = await create({ owner: 'acct_9', scopes: ['accounts:read'] });
    const r = await onB.call('POST', `/v1/keys/${k.apiKey}/rotate`, { json: { graceSeconds: 2 } });
    const rotated = r.json() as Key & { previousSecretValidUntil: string };
    used.add(rotated.apiSecret as string);
    expect(r.status).toBe(200);
    expect(rotated.apiSecret).not.toBe(k.apiSecret);
    for (const gate of [a, b]) {
      await expect
        .poll(async () => (await proxied(gate, k.apiKey, rotated.apiSecret as string)).status, {
          timeout: 1_000,
          interval: 20,
        })
        .toBe(200);
      expect((await proxied(gate, k.apiKey, k.apiSecret as string)).status).toBe(200);
    }
    await new Promise((resolve) => setTimeout(resolve, Date.parse(rotated.previousSecretValidUntil) - Date.now() + 50));
    for (const gate of [a, b]) {
      expect(seen(await proxied(gate, k.apiKey, k.apiSecret as string))).toEqual([401, 40106]);
      expect((await proxied(gate, k.apiKey, rotated.apiSecret as string)).status).toBe(200);
    }
  });

  it('a retried create with the same Idempotency-Key makes one key, on either instance; the same key with another body is 409', async () => {
    const body = { owner: 'acct_idem', scopes: ['accounts:read'] };
    const first = await create(body, { 'Idempotency-Key': 'signup-acct_idem-1' });
    const again = await onB.call('POST', '/v1/keys', {
      json: body,
      headers: { 'Idempotency-Key': 'signup-acct_idem-1' },
    });
    expect([first.r.status, again.status, again.headers['idempotent-replayed']]).toEqual([201, 201, 'true']);
    expect((again.json() as Key).apiKey).toBe(first.k.apiKey);
    expect((again.json() as Key).apiSecret).toBe(first.k.apiSecret);
    const concurrent = await Promise.all(
      [1, 2, 3, 4].map(() =>
        writer.call('POST', '/v1/keys', { json: body, headers: { 'Idempotency-Key': 'signup-acct_idem-2' } }),
      ),
    );
    expect(new Set(concurrent.map((c) => (c.json() as Key).apiKey)).size).toBe(1);
    const other = await writer.call('POST', '/v1/keys', {
      json: { ...body, label: 'different' },
      headers: { 'Idempotency-Key': 'signup-acct_idem-1' },
    });
    expect([other.status, (other.json() as { error: string }).error]).toEqual([409, 'conflict']);
    // Another token's retry key never finds this one's key.
    const list = (await reader.call('GET', '/v1/keys?owner=acct_idem')).json() as { keys: Key[] };
    expect(list.keys).toHaveLength(2);
  });

  it('a replay is the first answer only while it is true: after a rotate or a revoke, 409 naming the key and no secret (on either instance)', async () => {
    const body = { owner: 'acct_idem_changed', scopes: ['accounts:read'] };
    for (const [n, change] of [
      ['rotate', (k: Key) => writer.call('POST', `/v1/keys/${k.apiKey}/rotate`, { json: { graceSeconds: 60 } })],
      ['revoke', (k: Key) => writer.call('POST', `/v1/keys/${k.apiKey}/revoke`, { json: { reason: 'leaked' } })],
    ] as const) {
      const headers = { 'Idempotency-Key': `signup-${n}-1` };
      const first = await create(body, headers);
      const changed = await change(first.k);
      expect(changed.status).toBe(200);
      const rotatedSecret = (changed.json() as { apiSecret?: string }).apiSecret;
      if (rotatedSecret) used.add(rotatedSecret);
      for (const client of [writer, onB]) {
        const again = await client.call('POST', '/v1/keys', { json: body, headers });
        expect([again.status, (again.json() as { error: string }).error]).toEqual([409, 'conflict']);
        expect(again.body).toContain(first.k.apiKey);
        expect(again.body).toContain(first.k.id);
        expect(again.body).not.toContain('apiSecret');
        expect(again.body).not.toContain(first.k.apiSecret);
        if (rotatedSecret) expect(again.body).not.toContain(rotatedSecret);
      }
    }
    // A replay that is still true is audited (actor, key), like a change.
    const c = new Redis(redis.url);
    const entries = (await c.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, f]) => JSON.parse(f[1] as string) as { action: string },
    );
    c.disconnect();
    expect(entries.filter((e) => e.action === 'create-replay').length).toBeGreaterThan(0);
  });

  it('a create that hit a paused Redis (503) leaves no claim behind: its retry with the same Idempotency-Key is 201, one key, a secret that works', async () => {
    const body = { owner: 'acct_idem_paused', scopes: ['accounts:read'] };
    const headers = { 'Idempotency-Key': 'signup-paused-1' };
    const c = new Redis(redis.url);
    // Writes (the key change script) wait in Redis well past the command deadline (500 ms): the create answers 503.
    const pauseMs = 3_000;
    await c.call('CLIENT', 'PAUSE', String(pauseMs), 'WRITE');
    const pausedAt = Date.now();
    const first = await writer.call('POST', '/v1/keys', { json: body, headers });
    expect([first.status, (first.json() as { error: string }).error]).toEqual([503, 'store_unavailable']);
    await new Promise((r) => setTimeout(r, Math.max(0, pausedAt + pauseMs - Date.now()) + 100));
    c.disconnect();
    // Whether or not the first write landed once Redis resumed, the retry answers 201 with a key and its secret.
    const again = await writer.call('POST', '/v1/keys', { json: body, headers });
    expect(again.status).toBe(201);
    const k = again.json() as Key;
    used.add(k.apiSecret as string);
    const list = (await reader.call('GET', '/v1/keys?owner=acct_idem_paused')).json() as { keys: Key[] };
    expect(list.keys.map((x) => x.apiKey)).toEqual([k.apiKey]);
    expect((await proxied(a, k.apiKey, k.apiSecret as string)).status).toBe(200);
    // And a third call replays it: the same key and secret.
    const third = await onB.call('POST', '/v1/keys', { json: body, headers });
    expect([third.status, (third.json() as Key).apiSecret]).toEqual([201, k.apiSecret]);
  });

  it("an account's list shows only its keys, in stable pages", async () => {
    const mine: string[] = [];
    for (let i = 0; i < 5; i++) mine.push((await create({ owner: 'acct_list', scopes: [] })).k.apiKey);
    await create({ owner: 'acct_list_other' });
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const r = await reader.call('GET', `/v1/keys?owner=acct_list&limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      const page = r.json() as { keys: Key[]; nextCursor: string | null };
      expect(page.keys.every((k) => k.owner === 'acct_list')).toBe(true);
      pages.push(page.keys.map((k) => k.apiKey));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(pages.map((p) => p.length)).toEqual([2, 2, 1]);
    expect(pages.flat()).toEqual([...mine].sort());
    const revoked = mine[0] as string;
    await writer.call('POST', `/v1/keys/${revoked}/revoke`, {});
    const active = (await reader.call('GET', '/v1/keys?owner=acct_list&state=active')).json() as { keys: Key[] };
    expect(active.keys.map((k) => k.apiKey)).toEqual([...mine].sort().filter((k) => k !== revoked));
  });

  describe('authorization', () => {
    const writeToken = () => tokens.tokens['settings-backend'] as string;
    const lastByte = (t: string) => `${t.slice(0, -1)}${t.endsWith('A') ? 'B' : 'A'}`;
    it.each([
      ['no token', {}],
      ['a wrong token', { authorization: 'Bearer kgm_not-a-token-at-all-0000000000000000000000' }],
      ['a token differing in its last byte', { authorization: () => `Bearer ${lastByte(writeToken())}` }],
      ['a token with a character added', { authorization: () => `Bearer ${writeToken()}A` }],
      ['a token cut short by one character', { authorization: () => `Bearer ${writeToken().slice(0, -1)}` }],
      ['another scheme', { authorization: () => `Basic ${writeToken()}` }],
      ['the sha256 from the file instead of the token', { authorization: () => `Bearer ${sha256Hex(writeToken())}` }],
    ] as const)('%s: 401 with WWW-Authenticate: Bearer, on every route', async (_name, h) => {
      const value =
        typeof (h as { authorization?: unknown }).authorization === 'function'
          ? (h as { authorization: () => string }).authorization()
          : (h as { authorization?: string }).authorization;
      const headers: Record<string, string> = value === undefined ? {} : { authorization: value };
      for (const [method, path] of [
        ['GET', '/v1/keys'],
        ['POST', '/v1/keys'],
        ['GET', '/v1/keys/kg_x'],
        ['PATCH', '/v1/keys/kg_x'],
        ['DELETE', '/v1/keys/kg_x'],
        ['POST', '/v1/keys/kg_x/rotate'],
        ['POST', '/v1/keys/kg_x/revoke'],
        ['GET', '/v1/keys/kg_x/usage'],
        ['GET', '/v1/openapi.json'],
      ] as const) {
        const r = await writer.call(method, path, { token: null, headers, json: {} });
        expect([r.status, r.headers['www-authenticate'], (r.json() as { error: string }).error]).toEqual([
          401,
          'Bearer realm="keygate-management"',
          'unauthorized',
        ]);
      }
    });

    it('two Authorization headers: 401', async () => {
      const r = await send(a.managementUrl as string, '/v1/keys', {
        headers: { Authorization: [`Bearer ${writeToken()}`, `Bearer ${writeToken()}`] },
      });
      openapi.check('GET', '/v1/keys', r);
      expect(r.status).toBe(401);
    });

    it('a read token on every write route: 403, nothing changed; on read routes: 200', async () => {
      const { k } = await create({ owner: 'acct_ro', scopes: ['accounts:read'] });
      const before = await snapshot();
      for (const [method, path, json] of [
        ['POST', '/v1/keys', { owner: 'acct_ro' }],
        ['PATCH', `/v1/keys/${k.apiKey}`, { scopes: [] }],
        ['DELETE', `/v1/keys/${k.apiKey}`, undefined],
        ['POST', `/v1/keys/${k.apiKey}/rotate`, {}],
        ['POST', `/v1/keys/${k.apiKey}/revoke`, {}],
      ] as const) {
        const r = await reader.call(method, path, json === undefined ? {} : { json });
        expect([method, path, r.status, (r.json() as { error: string }).error]).toEqual([
          method,
          path,
          403,
          'read_only_token',
        ]);
      }
      expect(await snapshot()).toEqual(before);
      for (const path of ['/v1/keys', `/v1/keys/${k.apiKey}`, `/v1/keys/${k.apiKey}/usage`, '/v1/openapi.json'])
        expect((await reader.call('GET', path)).status).toBe(200);
    });

    it('the tokens file reloads: a token added works within a second, a token removed is refused', async () => {
      const extra = writeTokensFile([{ name: 'late-joiner', access: 'write' }]);
      const late = extra.tokens['late-joiner'] as string;
      used.add(late);
      const lines = (file: string) =>
        readFileSync(file, 'utf8')
          .split('\n')
          .filter((l) => l.includes('sha256'));
      const both = `tokens:\n${[...lines(tokens.file), ...lines(extra.file)].join('\n')}\n`;
      writeFileSync(tokens.file, both);
      await expect
        .poll(async () => (await send(b.managementUrl as string, '/v1/keys', { headers: bearer(late) })).status, {
          timeout: 2_000,
          interval: 50,
        })
        .toBe(200);
      writeFileSync(
        tokens.file,
        `tokens:\n${lines(tokens.file)
          .filter((l) => !l.includes('late-joiner'))
          .join('\n')}\n`,
      );
      await expect
        .poll(async () => (await send(b.managementUrl as string, '/v1/keys', { headers: bearer(late) })).status, {
          timeout: 2_000,
          interval: 50,
        })
        .toBe(401);
      // A broken file keeps the last good tokens.
      const good = readFileSync(tokens.file, 'utf8');
      writeFileSync(tokens.file, 'tokens: [{ name: x, sha256: nothex, access: admin }]\n');
      await new Promise((r) => setTimeout(r, 400));
      expect(a.keygate.reloadManagementTokens()).toBe(false);
      expect((await reader.call('GET', '/v1/keys')).status).toBe(200);
      writeFileSync(tokens.file, good);
      expect(a.keygate.reloadManagementTokens()).toBe(true);
    });
  });

  /** Every key as stored (secrets included) and the audit stream's length: what "nothing changed" compares. */
  async function snapshot(): Promise<{ keys: unknown; audit: number }> {
    const c = new Redis(redis.url);
    try {
      const names = await c.zrange('keygate:{keystore}:index', 0, -1);
      const keys = await Promise.all(names.map((n) => c.hgetall(`keygate:{keystore}:key:${n}`)));
      return { keys, audit: await c.xlen('keygate:{keystore}:audit') };
    } finally {
      c.disconnect();
    }
  }

  describe('bad input gets a clear answer and changes nothing', () => {
    let target: Key;
    beforeAll(async () => {
      target = (await create({ owner: 'acct_bad', scopes: ['accounts:read'] })).k;
    });
    const big = JSON.stringify({ label: 'x'.repeat(70 * 1024) });
    it.each<
      [
        string,
        string,
        () => string,
        { body?: string; json?: unknown; headers?: Record<string, string> },
        number,
        string,
        RegExp[],
      ]
    >([
      [
        'not JSON (text/plain)',
        'POST',
        () => '/v1/keys',
        { body: 'owner=acct_1', headers: { 'content-type': 'text/plain' } },
        415,
        'not_json',
        [],
      ],
      [
        'JSON without a JSON content type',
        'PATCH',
        () => `/v1/keys/${target.apiKey}`,
        { body: '{"label":"x"}', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
        415,
        'not_json',
        [],
      ],
      [
        'over 64 KiB',
        'POST',
        () => '/v1/keys',
        { body: big, headers: { 'content-type': 'application/json' } },
        413,
        'body_too_large',
        [],
      ],
      [
        'over 64 KiB on PATCH',
        'PATCH',
        () => `/v1/keys/${target.apiKey}`,
        { body: big, headers: { 'content-type': 'application/json' } },
        413,
        'body_too_large',
        [],
      ],
      [
        'broken JSON',
        'POST',
        () => '/v1/keys',
        { body: '{"owner":', headers: { 'content-type': 'application/json' } },
        400,
        'invalid_request',
        [/^body: not valid JSON$/],
      ],
      [
        'a JSON array',
        'POST',
        () => '/v1/keys',
        { json: [1] },
        400,
        'invalid_request',
        [/^body: must be a JSON object$/],
      ],
      [
        'every problem at once on create',
        'POST',
        () => '/v1/keys',
        {
          json: {
            owner: 'acct 42',
            scopes: ['bad scope', 'ok:read'],
            allowIps: ['10.0.0.0/33', 'nope'],
            rateLimit: { rate: '5/d' },
            expiresAt: 'soon',
            colour: 'blue',
          },
        },
        400,
        'invalid_request',
        [
          /^body\.colour: unknown field/,
          /^body\.owner:/,
          /^body\.scopes: invalid scope "bad scope"$/,
          /10\.0\.0\.0\/33/,
          /"nope"/,
          /^body\.rateLimit/,
          /^body\.expiresAt:/,
        ],
      ],
      [
        'owner on PATCH (never changed)',
        'PATCH',
        () => `/v1/keys/${target.apiKey}`,
        { json: { owner: 'acct_other' } },
        400,
        'invalid_request',
        [/^body\.owner: unknown field/],
      ],
      [
        'every problem at once on PATCH',
        'PATCH',
        () => `/v1/keys/${target.apiKey}`,
        { json: { scopes: 'accounts:read', allowIps: ['::1/129'], label: '' } },
        400,
        'invalid_request',
        [/^body\.scopes: must be a list of strings$/, /::1\/129/, /^body\.label:/],
      ],
      [
        'an empty PATCH',
        'PATCH',
        () => `/v1/keys/${target.apiKey}`,
        { json: {} },
        400,
        'invalid_request',
        [/nothing to change/],
      ],
      [
        'a bad grace',
        'POST',
        () => `/v1/keys/${target.apiKey}/rotate`,
        { json: { graceSeconds: -1, extra: 1 } },
        400,
        'invalid_request',
        [/^body\.extra: unknown field/, /^body\.graceSeconds:/],
      ],
      [
        'a bad revoke reason',
        'POST',
        () => `/v1/keys/${target.apiKey}/revoke`,
        { json: { reason: 42 } },
        400,
        'invalid_request',
        [/^body\.reason:/],
      ],
      [
        'bad list parameters',
        'GET',
        () => '/v1/keys?limit=0&state=gone&owner=a%20b&sort=x',
        {},
        400,
        'invalid_request',
        [/^query\.sort: unknown/, /^query\.owner:/, /^query\.state:/, /^query\.limit:/],
      ],
      [
        'a bad usage window',
        'GET',
        () => `/v1/keys/${target.apiKey}/usage?days=90`,
        {},
        400,
        'invalid_request',
        [/^query\.days:/],
      ],
      [
        'a bad Idempotency-Key',
        'POST',
        () => '/v1/keys',
        { json: {}, headers: { 'idempotency-key': 'x'.repeat(300) } },
        400,
        'invalid_request',
        [/^Idempotency-Key:/],
      ],
      ['an unknown key (PATCH)', 'PATCH', () => '/v1/keys/kg_nobody', { json: { label: 'x' } }, 404, 'not_found', []],
      ['an unknown key (rotate)', 'POST', () => '/v1/keys/kg_nobody/rotate', { json: {} }, 404, 'not_found', []],
      ['an unknown key (revoke)', 'POST', () => '/v1/keys/kg_nobody/revoke', {}, 404, 'not_found', []],
      ['an unknown key (usage)', 'GET', () => '/v1/keys/kg_nobody/usage', {}, 404, 'not_found', []],
      ['a key name no key can have', 'GET', () => '/v1/keys/a%2Fb', {}, 404, 'no_route', []],
      ['an unknown action', 'POST', () => `/v1/keys/${target.apiKey}/promote`, { json: {} }, 404, 'no_route', []],
    ])('%s', async (_name, method, path, options, status, error, problems) => {
      const before = await snapshot();
      const p = path();
      const r = await send(a.managementUrl as string, p, {
        method,
        headers: {
          ...bearer(tokens.tokens['settings-backend'] as string),
          ...(options.json !== undefined && { 'content-type': 'application/json' }),
          ...options.headers,
        },
        ...(options.body !== undefined
          ? { body: options.body }
          : options.json !== undefined
            ? { body: JSON.stringify(options.json) }
            : {}),
      });
      if (error !== 'no_route') openapi.check(method, p, r);
      const got = r.json() as { error: string; problems?: string[] };
      expect([r.status, got.error]).toEqual([status, error]);
      for (const re of problems)
        expect(
          got.problems?.some((x) => re.test(x)),
          `${re} in ${JSON.stringify(got.problems)}`,
        ).toBe(true);
      if (problems.length > 0) expect(got.problems).toHaveLength(problems.length);
      expect(await snapshot()).toEqual(before);
      expect((await proxied(b, target.apiKey, target.apiSecret as string)).status).toBe(200);
    });
  });

  it('every change is audited with the token name as the actor, never a secret', async () => {
    const c = new Redis(redis.url);
    const entries = (await c.xrange('keygate:{keystore}:audit', '-', '+')).map(
      ([, f]) => JSON.parse(f[1] as string) as { actor: string; action: string },
    );
    c.disconnect();
    expect(entries.length).toBeGreaterThan(10);
    expect(new Set(entries.map((e) => e.actor))).toEqual(new Set(['settings-backend']));
    expect(new Set(entries.map((e) => e.action))).toEqual(
      new Set(['create', 'create-replay', 'update', 'rotate', 'revoke', 'delete']),
    );
    const logged = a.logs.filter((l) => l.includes('"audit"'));
    expect(logged.length).toBeGreaterThan(0);
  });

  it('no token or secret used by this file appears in any log line or metric of either instance', async () => {
    const metrics = await Promise.all([a, b].map(async (g) => (await send(g.adminUrl, '/metrics')).body));
    const text = [...a.logs, ...b.logs, ...metrics].join('\n');
    expect(a.logs.some((l) => l.includes('"management request"'))).toBe(true);
    expect(used.size).toBeGreaterThan(20);
    const leaked = [...used].filter((s) => text.includes(s) || text.includes(sha256Hex(s)));
    expect(leaked).toEqual([]);
    expect(openapi.checked).toBeGreaterThan(60);
  });
});

describe('management API with the embedded store', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let c: ManagementClient;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'ops', access: 'write' }]);
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'embedded', owner: 'acct_e', credits: { remaining: 40 } })],
      env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file },
    });
    c = managementClient(gate.managementUrl as string, tokens.tokens.ops as string);
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });
  /** What a write could have changed: the keys, the key's record and credits, the owner. */
  const snapshot = async () => ({
    keys: ((await c.call('GET', '/v1/keys')).json() as { keys: Key[] }).keys.map((k) => k.apiKey),
    key: (await c.call('GET', '/v1/keys/embedded')).json(),
    owner: (await c.call('GET', '/v1/owners/acct_e')).json(),
  });

  it('reads, and every write route answers 409 writes_need_redis', async () => {
    const list = (await c.call('GET', '/v1/keys?owner=acct_e')).json() as { keys: Key[] };
    expect(list.keys.map((k) => k.apiKey)).toEqual(['embedded']);
    for (const [method, path] of [
      ['POST', '/v1/keys'],
      ['PATCH', '/v1/keys/embedded'],
      ['DELETE', '/v1/keys/embedded'],
      ['POST', '/v1/keys/embedded/rotate'],
      ['POST', '/v1/keys/embedded/revoke'],
      ['PUT', '/v1/owners/acct_e'],
    ] as const) {
      const json = method === 'PUT' ? { rateLimit: { rate: '5/s', burst: 5 } } : { label: 'x' };
      const r = await c.call(method, path, method === 'DELETE' ? {} : { json });
      expect([r.status, (r.json() as { error: string }).error], `${method} ${path}`).toEqual([
        409,
        'writes_need_redis',
      ]);
    }
    expect((await gate.keygate.store.getKey('embedded'))?.state).toBe('active');
  });

  it('a write carrying credits answers 501 credits_need_redis naming the field, and changes nothing', async () => {
    const before = await snapshot();
    expect((before.key as { credits: { remaining: number } }).credits.remaining).toBe(40);
    const credits = { remaining: 5, refill: { amount: 5, interval: 'day' } };
    const cases: ReadonlyArray<readonly [string, string, unknown, string]> = [
      ['POST', '/v1/keys', { owner: 'acct_e', scopes: ['accounts:read'], credits }, 'body.credits'],
      ['PATCH', '/v1/keys/embedded', { label: 'spent', credits }, 'body.credits'],
      ['PATCH', '/v1/keys/embedded', { credits: null }, 'body.credits'],
      ['PUT', '/v1/owners/acct_e', { rateLimit: { rate: '5/s', burst: 5 }, credits }, 'body.credits'],
      ['POST', '/v1/keys/embedded/credits', { add: 5 }, 'body.add'],
      ['POST', '/v1/owners/acct_e/credits', { add: 5 }, 'body.add'],
    ];
    for (const [method, path, json, field] of cases) {
      const r = await c.call(method, path, { json });
      const got = r.json() as { error: string; problems?: string[] };
      expect([r.status, got.error], `${method} ${path}`).toEqual([501, 'credits_need_redis']);
      expect(got.problems, `${method} ${path}`).toHaveLength(1);
      expect(got.problems?.[0], `${method} ${path}`).toMatch(new RegExp(`^${field.replace('.', '\\.')}: .*credits`));
    }
    expect(await snapshot()).toEqual(before);
  });
});
