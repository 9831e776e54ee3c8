import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toExternal, type KeyRecord } from '../../src/keys/key-record.js';
import { LIST_SCAN_BUDGET } from '../../src/operations/key-listing.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, waitStoreReady, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 27 item 4: `GET /v1/keys` read, decoded and sorted every key on every call. With 50,000 keys
 * in Redis, a page reads only that page: counted in Redis's own command statistics and output bytes
 * (INFO commandstats / stats), never timed. Beside list calls in a loop, every proxied request still
 * passes. (How the proxy's throughput compares with and without them: `npm run bench:listing`.)
 */
const KEYS = 50_000;
const BIG = 'acct_big'; // 5,000 keys; the rest spread over 1,000 owners
const name = (i: number) => `kg_scale_${String(i).padStart(6, '0')}`;
const ownerOf = (i: number) => (i % 10 === 0 ? BIG : `acct_${i % 1_000}`);

type Page = { keys: Array<{ apiKey: string; owner?: string }>; nextCursor: string | null };

describe(`key listing with ${KEYS.toLocaleString('en')} keys in Redis`, () => {
  let redis: TestRedis;
  let raw: Redis;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let reader: ManagementClient;
  /** What reading every record would cost in reply bytes (their stored JSON alone). */
  let allRecordBytes = 0;
  const probe = makeKey({ apiKey: 'kg_probe', owner: BIG });

  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.url);
    // Seeded through the store's own atomic write, 1,000 keys per script call.
    const seeder = createRedisStore(
      { url: redis.url, commandTimeoutMs: 30_000 },
      { logger: pino({ level: 'silent' }) },
    );
    await waitStoreReady(seeder);
    const template = makeKey({ apiKey: 'template' });
    for (let from = 0; from < KEYS; from += 1_000) {
      const records: KeyRecord[] = [];
      for (let i = from; i < from + 1_000; i++)
        records.push({ ...template, apiKey: name(i), id: `id-${name(i)}`, owner: ownerOf(i) });
      for (const r of records) allRecordBytes += JSON.stringify(toExternal(r)).length;
      const done = await seeder.commitKeyChanges({
        writes: records.map((r) => ({ apiKey: r.apiKey, next: r })),
        audit: [],
      });
      expect(done.ok).toBe(true);
    }
    await seeder.putKey(probe);
    await seeder.close();
    expect(await raw.zcard('keygate:{keystore}:index')).toBe(KEYS + 1);

    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'auditor', access: 'read' }]);
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      env: { KEYGATE_MANAGEMENT_PORT: '0', KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file, KEYGATE_LOG_LEVEL: 'warn' },
    });
    reader = managementClient(gate.managementUrl as string, tokens.tokens.auditor as string);
    // Keygate reads the whole index once at start, in pages, to build its known-keys filter (issue 30). Let that
    // finish before counting a page's commands: the filter is in force once a name never written is "unknown".
    const { store } = gate.keygate;
    const until = Date.now() + guard(30_000);
    while (store.mayHaveKey?.('never-written') !== false) {
      if (Date.now() > until) throw new Error('the known-keys filter was not built');
      await new Promise((r) => setTimeout(r, 50));
    }
  }, guard(120_000));
  afterAll(async () => {
    raw?.disconnect();
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  /** Redis's command counts and output bytes from here on (our own INFO calls left out). */
  async function redisWork<T>(
    fn: () => Promise<T>,
  ): Promise<{ result: T; calls: Record<string, number>; outBytes: number }> {
    const counts = async () => {
      const [stats, info] = await Promise.all([raw.info('commandstats'), raw.info('stats')]);
      const calls: Record<string, number> = {};
      for (const m of stats.matchAll(/^cmdstat_(\w+(?:\|\w+)?):calls=(\d+)/gm)) calls[m[1] as string] = Number(m[2]);
      return { calls, out: Number(/total_net_output_bytes:(\d+)/.exec(info)?.[1]) };
    };
    const before = await counts();
    const result = await fn();
    const after = await counts();
    const calls: Record<string, number> = {};
    for (const [cmd, n] of Object.entries(after.calls)) {
      const d = n - (before.calls[cmd] ?? 0);
      if (d > 0 && cmd !== 'info') calls[cmd] = d;
    }
    return { result, calls, outBytes: after.out - before.out };
  }
  const total = (calls: Record<string, number>) => Object.values(calls).reduce((a, b) => a + b, 0);

  it('a page of ?owner=…&limit=50 reads that page only: one range read, 50 records, 50 usage hashes', async () => {
    let cursor: string | null = null;
    for (let n = 0; n < 3; n++) {
      const path: string = `/v1/keys?owner=${BIG}&limit=50${cursor ? `&cursor=${cursor}` : ''}`;
      const { result, calls, outBytes } = await redisWork(() => reader.call('GET', path));
      expect(result.status).toBe(200);
      const page = result.json() as Page;
      expect(page.keys).toHaveLength(50);
      expect(page.keys.every((k) => k.owner === BIG)).toBe(true);
      console.log(`[listing] page ${n + 1} of owner ${BIG}: ${JSON.stringify(calls)}, ${outBytes} bytes out`);
      expect(calls.zrangebylex).toBe(1);
      expect(calls.hget).toBe(50);
      // Besides those: the page's usage (lastUsedAt) and nothing that grows with the number of keys.
      expect(total(calls)).toBeLessThanOrEqual(1 + 50 + 50 + 2);
      expect(calls).not.toHaveProperty('zrange');
      expect(calls).not.toHaveProperty('scan');
      expect(outBytes).toBeLessThan(allRecordBytes / 100);
      cursor = page.nextCursor;
      expect(cursor).not.toBeNull();
    }
  });

  it('every key, no owner: the same bound per page, deep into the index', async () => {
    const first = (await reader.call('GET', `/v1/keys?limit=50`)).json() as Page;
    expect(first.keys.map((k) => k.apiKey)).toEqual([probe.apiKey, ...Array.from({ length: 49 }, (_, i) => name(i))]);
    // A cursor far into the index costs the same as the first page.
    const deep = Buffer.from(name(40_000)).toString('base64url');
    const { result, calls } = await redisWork(() => reader.call('GET', `/v1/keys?limit=50&cursor=${deep}`));
    expect((result.json() as Page).keys.map((k) => k.apiKey)).toEqual(
      Array.from({ length: 50 }, (_, i) => name(40_001 + i)),
    );
    expect(calls.zrangebylex).toBe(1);
    expect(calls.hget).toBe(50);
  });

  it(`with state (not indexed), a page reads at most ${LIST_SCAN_BUDGET} records, however few match`, async () => {
    const { result, calls } = await redisWork(() => reader.call('GET', `/v1/keys?state=revoked&limit=50`));
    const page = result.json() as Page;
    expect(page.keys).toEqual([]);
    expect(page.nextCursor).not.toBeNull(); // the budget ran out before the keys did: go on from there
    expect(calls.hget).toBe(LIST_SCAN_BUDGET);
    expect(total(calls)).toBeLessThanOrEqual(LIST_SCAN_BUDGET + 20);
  });

  it(
    'list calls in a loop beside proxied requests: every proxied request passes',
    async () => {
      let listing = true;
      let listCalls = 0;
      const listStatuses = new Map<number, number>();
      // Pages of 50, as a settings page asks for; one loop per index, each following its cursors.
      const loop = async (owner: string | undefined) => {
        let cursor: string | null = null;
        while (listing) {
          const q = `limit=50${owner ? `&owner=${owner}` : ''}${cursor ? `&cursor=${cursor}` : ''}`;
          const r = await reader.call('GET', `/v1/keys?${q}`);
          listStatuses.set(r.status, (listStatuses.get(r.status) ?? 0) + 1);
          listCalls++;
          cursor = r.status === 200 ? (r.json() as Page).nextCursor : null;
        }
      };
      const loops = [loop(BIG), loop(undefined)];
      const failed: string[] = [];
      let proxied = 0;
      const lane = async () => {
        for (let i = 0; i < 100; i++) {
          const r = await send(gate.url, ACCOUNTS_PATH, {
            headers: bearer(token(probe.apiKey, probe.secret as string)),
          });
          proxied++;
          if (r.status !== 200) failed.push(`${r.status} ${r.body}`);
        }
      };
      try {
        await Promise.all([lane(), lane(), lane(), lane()]);
      } finally {
        listing = false;
        await Promise.all(loops);
      }
      console.log(`[listing] ${proxied} proxied requests beside ${listCalls} list calls of 50 keys`);
      expect(listCalls).toBeGreaterThan(4);
      expect([...listStatuses.keys()]).toEqual([200]);
      const logged = gate.logs.filter((l) => /timed out|unavailable/.test(l));
      expect(failed, logged.join('\n')).toEqual([]);
    },
    guard(120_000),
  );
});
