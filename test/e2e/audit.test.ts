import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisKeyStore } from '../../src/cli/keys/open-key-store.js';
import type { AuditEntry } from '../../src/store/audit-entry.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { runCli } from '../helpers/cli-run.js';

type Page = { entries: AuditEntry[]; nextCursor: string | null };

describe('the audit log: GET /v1/audit and keygate audit, one reader over the Redis stream', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let embedded: RunningKeygate;
  let writer: ManagementClient;
  let reader: ManagementClient;
  let onEmbedded: ManagementClient;
  const openapi = createOpenApiCheck();
  const secrets: string[] = [];
  const made: { apiKey: string; owner: string }[] = [];
  let startedAt = '';

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([
      { name: 'backend', access: 'write' },
      { name: 'auditor', access: 'read' },
    ]);
    const env = { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file };
    gate = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    embedded = await startKeygate({ upstream: upstream.url, env });
    writer = managementClient(gate.managementUrl as string, tokens.tokens.backend as string, openapi);
    reader = managementClient(gate.managementUrl as string, tokens.tokens.auditor as string, openapi);
    onEmbedded = managementClient(embedded.managementUrl as string, tokens.tokens.auditor as string, openapi);
    startedAt = new Date().toISOString();
    // 3 owners x 2 keys, each created, updated, rotated; the first of each revoked.
    for (const owner of ['acme', 'beta', 'gamma'])
      for (let i = 0; i < 2; i++) {
        const k = (await writer.call('POST', '/v1/keys', { json: { owner, scopes: ['accounts:read'] } })).json() as {
          apiKey: string;
          apiSecret: string;
        };
        secrets.push(k.apiSecret);
        made.push({ apiKey: k.apiKey, owner });
        await writer.call('PATCH', `/v1/keys/${k.apiKey}`, { json: { label: `key ${i}`, scopes: ['a:b'] } });
        const r = (await writer.call('POST', `/v1/keys/${k.apiKey}/rotate`, { json: { graceSeconds: 60 } })).json() as {
          apiSecret: string;
        };
        secrets.push(r.apiSecret);
        if (i === 0) await writer.call('POST', `/v1/keys/${k.apiKey}/revoke`, { json: { reason: 'offboarded' } });
      }
  });
  afterAll(async () => {
    await gate?.close();
    await embedded?.close();
    await upstream?.close();
    await redis?.stop();
  });

  const get = async (query: string) => {
    const r = await reader.call('GET', `/v1/audit${query}`);
    expect(r.status).toBe(200);
    return r.json() as Page;
  };

  it('pages oldest first with an exclusive cursor: every entry once, in order, the last page with nextCursor null', async () => {
    const all: AuditEntry[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const p: Page = await get(`?limit=4${cursor ? `&cursor=${cursor}` : ''}`);
      expect(p.entries.length).toBeLessThanOrEqual(4);
      all.push(...p.entries);
      cursor = p.nextCursor;
      pages++;
    } while (cursor !== null);
    // 6 creates, 6 updates, 6 rotates, 3 revokes.
    expect(all).toHaveLength(21);
    expect(pages).toBeGreaterThanOrEqual(6);
    expect(all.map((e) => e.at)).toEqual([...all.map((e) => e.at)].sort());
    expect(all[0]).toMatchObject({ action: 'create', actor: 'backend', apiKey: made[0]?.apiKey, owner: 'acme' });
    expect((await get('?limit=1000')).entries).toEqual(all);
  });

  it('filters: apiKey, owner, action and since, each alone and together', async () => {
    const first = made[0] as { apiKey: string };
    const one = await get(`?apiKey=${first.apiKey}`);
    expect(one.entries.map((e) => e.action)).toEqual(['create', 'update', 'rotate', 'revoke']);
    expect(one.entries[1]).toMatchObject({ changes: ['scopes', 'label'] });
    expect(one.entries[3]).toMatchObject({ reason: 'offboarded', owner: 'acme' });
    expect(one.nextCursor).toBeNull();
    const beta = await get('?owner=beta');
    expect(beta.entries).toHaveLength(7);
    expect(new Set(beta.entries.map((e) => e.owner))).toEqual(new Set(['beta']));
    const revokes = await get('?action=revoke');
    expect(revokes.entries.map((e) => e.owner)).toEqual(['acme', 'beta', 'gamma']);
    expect((await get('?action=revoke&owner=gamma')).entries).toHaveLength(1);
    expect((await get(`?since=${encodeURIComponent(startedAt)}`)).entries).toHaveLength(21);
    expect((await get('?since=2999-01-01T00:00:00Z')).entries).toEqual([]);
    expect((await get('?since=2999-01-01T00:00:00Z')).nextCursor).toBeNull();
  });

  it('no secret in any entry, nor anything of the stream beyond the entry fields', async () => {
    const text = JSON.stringify(await get('?limit=1000'));
    expect(secrets.length).toBe(12);
    for (const s of secrets) expect(text).not.toContain(s);
    expect(text).not.toContain('kgs_');
  });

  it('every problem of a query is listed at once (400); an unknown parameter too', async () => {
    const r = await reader.call('GET', '/v1/audit?limit=0&since=yesterday&cursor=abc&action=explode&x=1');
    expect(r.status).toBe(400);
    const problems = (r.json() as { problems: string[] }).problems;
    expect(problems).toHaveLength(5);
    expect(problems.map((p) => p.split(':')[0])).toEqual([
      'query.x',
      'query.limit',
      'query.since',
      'query.cursor',
      'query.action',
    ]);
  });

  it.each(['1969-12-31T23:59:59Z', '0001-01-01', '1900-06-01T00:00:00+02:00'])(
    'a since before 1970 (%s) is 400 naming the field, never 503',
    async (since) => {
      const r = await reader.call('GET', `/v1/audit?since=${encodeURIComponent(since)}`);
      expect(r.status).toBe(400);
      expect((r.json() as { problems: string[] }).problems).toEqual([
        'query.since: a time at or after 1970-01-01T00:00:00Z',
      ]);
    },
  );

  it('with the embedded store there is no audit log: 501 audit_needs_redis', async () => {
    const r = await onEmbedded.call('GET', '/v1/audit');
    expect([r.status, (r.json() as { error: string }).error]).toEqual([501, 'audit_needs_redis']);
  });

  it('keygate audit reads the same: --key, --owner, --since, --json; a bad --since is a usage error', async () => {
    const cli = async (...args: string[]) => {
      return runCli(args, { env: { KEYGATE_REDIS_URL: redis.url }, openKeyStore: openRedisKeyStore });
    };
    const first = made[0] as { apiKey: string };
    const json = await cli('audit', '--key', first.apiKey, '--json');
    expect(json.code).toBe(0);
    expect(JSON.parse(json.out)).toEqual((await get(`?apiKey=${first.apiKey}`)).entries);
    const text = await cli('audit', '--owner', 'gamma', '--since', startedAt);
    expect(text.out.trimEnd().split('\n')).toHaveLength(7);
    expect(text.out).toMatch(/ backend {2}revoke {2}kg_[0-9a-f]{32} {2}gamma {2}reason=offboarded\n/);
    expect((await cli('audit', '--json', '--since', '2999-01-01T00:00:00Z')).out).toBe('[]\n');
    const bad = await cli('audit', '--since', 'yesterday');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('--since');
  });
});
