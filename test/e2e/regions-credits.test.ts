import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRedisKeyStore } from '../../src/cli/keys/open-key-store.js';
import { createKeyOperations } from '../../src/operations/key-operations.js';
import { ACCOUNTS_PATH, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { createOpenApiCheck, managementClient, writeTokensFile, type ManagementClient } from '../helpers/management.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { until } from '../helpers/redis-topology.js';
import { startRegions, type RegionsTopology } from '../helpers/regions.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';
import { runCli } from '../helpers/cli-run.js';

/**
 * Regions, a home move carries the credits balance (docs/regions.md "Moving a home"): two regions' request-state
 * Redis on loopback, one instance in each. A key that spent 900 of its 1,000 credits at fra and is moved to tyo
 * is forwarded exactly 100 more times, counted at tyo, then refused 429 credits_exhausted; the same for an owner's
 * credits shared by its keys (and the own credits of a key of it). `keygate keys` and `keygate owners` carry balances
 * too and top up at the home. A move away from a home that does not answer is made all the same, with a warning that
 * the balance was not carried.
 */
const SECRET = 'regions-credits-secret-0123456789';
let seq = 0;
/** A nonce no other request of this file uses. */
const nonce = (offsetMs = 0) => (BigInt(Date.now() + offsetMs) * 1_000_000n + BigInt(seq++ % 1_000_000)).toString();
const codeOf = (r: Reply) => (r.json() as { code?: number }).code;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const call = (gate: RunningKeygate, apiKey: string, n = nonce()) =>
  send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, SECRET, { nonce: n })), timeoutMs: 30_000 });

/** Where a key's nonces live: under its owner's slot when it has one (request-state.ts). */
const nonceName = (apiKey: string, owner: string | undefined, n: string) =>
  owner === undefined ? `keygate:{${apiKey}}:nonce:${n}` : `keygate:{owner:${owner}}:key:${apiKey}:nonce:${n}`;

/** `n` requests of `apiKey`, twenty at a time over both instances: every one must be forwarded. */
async function spend(gates: RunningKeygate[], apiKey: string, n: number): Promise<void> {
  for (let done = 0; done < n; done += 20) {
    const replies = await Promise.all(
      Array.from({ length: Math.min(20, n - done) }, (_, i) => call(gates[i % gates.length]!, apiKey)),
    );
    for (const r of replies) expect(r.status, r.body).toBe(200);
  }
}

describe('regions: a home move carries the credits balance', { timeout: guard(180_000) }, () => {
  let topo: RegionsTopology;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let writer: ManagementClient;
  let onB: ManagementClient;
  let fra: Redis;
  let tyo: Redis;
  const setAt = Date.now();
  const credits = { remaining: 1000, setAt };

  beforeAll(async () => {
    // A short recv_window: the nonces a move refuses (home_moved) are past within seconds, not a minute.
    topo = await startRegions(['fra', 'tyo'], undefined, ['maxRecvWindowSeconds: 2', 'defaultRecvWindowSeconds: 2']);
    upstream = await startRecordingUpstream();
    const tokens = writeTokensFile([{ name: 'operator', access: 'write' }]);
    // Long waits for Redis and for an upstream connection: a 503 after the admit would have spent credits without
    // forwarding (docs/keys.md#credits), which is not what this file counts.
    const env = {
      KEYGATE_MANAGEMENT_PORT: '0',
      KEYGATE_MANAGEMENT_TOKENS_FILE: tokens.file,
      KEYGATE_REDIS_TIMEOUT_MS: '5000',
      KEYGATE_UPSTREAM_QUEUE_TIMEOUT_MS: '30000',
    };
    const keys = [
      makeKey({ apiKey: 'plain', secret: SECRET, home: 'fra' }),
      makeKey({ apiKey: 'solo', secret: SECRET, home: 'fra', credits }),
      makeKey({ apiKey: 'acme-1', secret: SECRET, owner: 'acme', home: 'fra', credits }),
      makeKey({ apiKey: 'acme-2', secret: SECRET, owner: 'acme', home: 'fra' }),
      makeKey({ apiKey: 'far', secret: SECRET, home: 'fra', credits }),
      makeKey({ apiKey: 'cli-1', secret: SECRET, home: 'fra', credits }),
      makeKey({ apiKey: 'cli-2', secret: SECRET, home: 'fra', credits }),
      makeKey({ apiKey: 'gamma-1', secret: SECRET, owner: 'gamma', home: 'fra' }),
      makeKey({ apiKey: 'beta-1', secret: SECRET, owner: 'beta', home: 'fra' }),
    ];
    a = await startKeygate({ upstream: upstream.url, env: { ...topo.envOf('fra'), ...env }, keys });
    b = await startKeygate({ upstream: upstream.url, env: { ...topo.envOf('tyo', { replica: false }), ...env } });
    const openapi = createOpenApiCheck();
    writer = managementClient(a.managementUrl as string, tokens.tokens.operator as string, openapi);
    onB = managementClient(b.managementUrl as string, tokens.tokens.operator as string, openapi);
    fra = await topo.connect(topo.regions.fra!);
    tyo = await topo.connect(topo.regions.tyo!);
    for (const owner of ['acme', 'beta', 'gamma'])
      expect((await writer.call('PUT', `/v1/owners/${owner}`, { json: { credits: { remaining: 1000 } } })).status).toBe(
        200,
      );
    // Both fresh (each has heard its own heartbeat back) and both know the owners' credits.
    for (const g of [a, b]) {
      await until('fresh', async () => (await call(g, 'plain')).status === 200, guard(15_000));
      const known = () => ['acme', 'beta', 'gamma'].every((o) => g.keygate.store.ownerCredits(o)?.remaining === 1000);
      await until('owners known', () => Promise.resolve(known()), guard(15_000));
    }
  }, guard(60_000));
  afterAll(async () => {
    for (const g of [a, b]) await g?.close();
    await upstream?.close();
    await topo?.stop();
  });

  /**
   * After a move to tyo: requests of `apiKey` until one is refused otherwise than home_moved (40106, nothing
   * spent). Each forwarded one is counted where its nonce landed. First, until both instances have answered
   * home_moved once (they route to tyo from then on), a request forwarded by an instance that had not seen the move
   * yet was admitted at fra: the window the move's docs name, counted apart; after that, every one must be at tyo.
   */
  async function spendAfterMove(apiKey: string, owner: string | undefined) {
    let atTyo = 0;
    let atFra = 0;
    const seen = new Set<RunningKeygate>();
    const gates = [a, b];
    const deadline = Date.now() + guard(120_000);
    for (let i = 0; Date.now() < deadline; i++) {
      const gate = gates[i % 2]!;
      const n = nonce();
      const r = await call(gate, apiKey, n);
      if (r.status === 401 && codeOf(r) === 40106) {
        seen.add(gate);
        await sleep(100);
        continue;
      }
      if (r.status !== 200) return { atTyo, atFra, last: r };
      if ((await tyo.exists(nonceName(apiKey, owner, n))) === 1) atTyo++;
      else {
        expect(await fra.exists(nonceName(apiKey, owner, n)), 'a forwarded nonce is at one home').toBe(1);
        expect(seen.has(gate), 'admitted at the old home by an instance that had refused home_moved').toBe(false);
        atFra++;
      }
    }
    throw new Error(`${apiKey}: not refused within the guard`);
  }

  it("a key's balance: 900 of 1,000 spent at fra, moved to tyo, exactly 100 more forwarded, then 429 credits_exhausted", async () => {
    await spend([a, b], 'solo', 900);
    expect(await fra.hget('keygate:{solo}:credits', 'r')).toBe('100');
    const moved = await writer.call('PATCH', '/v1/keys/solo', { json: { home: 'tyo' } });
    expect(moved.status, moved.body).toBe(200);
    const key = moved.json() as { home: string; credits: { remaining: number }; warnings?: string[] };
    expect(key.home).toBe('tyo');
    expect(key.warnings).toBeUndefined();
    // The answer reads the balance at the new home: carried.
    expect(key.credits.remaining).toBe(100);
    expect(await tyo.hmget('keygate:{solo}:credits', 'r', 'g', 's')).toEqual(['100', String(setAt), '1000']);

    const { atTyo, atFra, last } = await spendAfterMove('solo', undefined);
    console.log(`[regions-credits] solo: ${atTyo} forwarded at tyo, ${atFra} at fra before the move was seen`);
    expect(atTyo).toBe(100);
    expect(last.status, last.body).toBe(429);
    expect(codeOf(last)).toBe(10429);
    expect(last.headers['retry-after']).toBeUndefined();
    expect(await tyo.hget('keygate:{solo}:credits', 'r')).toBe('0');
  });

  it("an owner's balance shared by its keys, and its key's own: moved with the owner, exactly what was left is spent at tyo", async () => {
    // The owner's 1,000: 300 through acme-1 (which also has 1,000 of its own), 600 through acme-2.
    await spend([a, b], 'acme-1', 300);
    await spend([a, b], 'acme-2', 600);
    expect(await fra.hget('keygate:{owner:acme}:credits', 'r')).toBe('100');
    expect(await fra.hget('keygate:{owner:acme}:key:acme-1:credits', 'r')).toBe('700');
    const moved = await writer.call('PUT', '/v1/owners/acme', { json: { home: 'tyo' } });
    expect(moved.status, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ owner: 'acme', home: 'tyo', warnings: [] });
    expect(await tyo.hget('keygate:{owner:acme}:credits', 'r')).toBe('100');
    expect(await tyo.hget('keygate:{owner:acme}:key:acme-1:credits', 'r')).toBe('700');
    // acme-2 has no credits of its own: nothing of it was written at tyo.
    expect(await tyo.exists('keygate:{owner:acme}:key:acme-2:credits')).toBe(0);

    const { atTyo, atFra, last } = await spendAfterMove('acme-1', 'acme');
    console.log(`[regions-credits] acme: ${atTyo} forwarded at tyo, ${atFra} at fra before the move was seen`);
    expect(atTyo).toBe(100);
    expect(last.status, last.body).toBe(429);
    expect(codeOf(last)).toBe(10429);
    expect(last.headers.ratelimit).toContain('"keygate-owner-credits";r=0');
    // The key's own credits were carried too: 700 there, 100 of them spent since.
    expect(await tyo.hget('keygate:{owner:acme}:key:acme-1:credits', 'r')).toBe('600');
    // The owner's credits are spent out for acme-2 too.
    const other = await call(a, 'acme-2');
    expect(other.status, other.body).toBe(429);
    expect(codeOf(other)).toBe(10429);
  });

  /** `keygate …` in process, as bin/keygate.js runs it, with the environment of a CLI in region fra. */
  async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
    return runCli(args, {
      env: { ...topo.envOf('fra'), KEYGATE_ACTOR: 'regions-credits-test' },
      openKeyStore: openRedisKeyStore,
    });
  }

  it("keygate keys update --home and owners set --home carry the balances too; keygate's credits are read and topped up at the home", async () => {
    await spend([a, b], 'cli-1', 10);
    await spend([a, b], 'gamma-1', 10);
    const key = await cli('keys', 'update', 'cli-1', '--home', 'tyo');
    expect(key.err).toBe('');
    expect(key.code).toBe(0);
    expect(JSON.parse(key.out)).toMatchObject({ home: 'tyo', credits: { remaining: 990 } });
    expect(await tyo.hget('keygate:{cli-1}:credits', 'r')).toBe('990');
    // A top-up lands at the home, where the admits spend.
    const topUp = await cli('keys', 'credits', 'cli-1', '--add', '5');
    expect(topUp.err).toBe('');
    expect(topUp.out).toBe('remaining: 995, no refill\n');
    expect(await tyo.hget('keygate:{cli-1}:credits', 'r')).toBe('995');

    const owner = await cli('owners', 'set', 'gamma', '--home', 'tyo');
    expect(owner.err).toBe('');
    expect(owner.code).toBe(0);
    expect(await tyo.hget('keygate:{owner:gamma}:credits', 'r')).toBe('990');
    const shown = await cli('owners', 'show', 'gamma');
    expect(shown.out).toContain('credits remaining: 990, no refill');
  });

  it('moving away from a home that does not answer: the move is made, with a warning that the balance was not carried', async () => {
    await spend([a, b], 'beta-1', 10);
    await spend([a, b], 'far', 10);
    expect(await fra.hget('keygate:{owner:beta}:credits', 'r')).toBe('990');
    await topo.regions.fra!.kill();

    const moved = await writer.call('PUT', '/v1/owners/beta', { json: { home: 'tyo' } });
    expect(moved.status, moved.body).toBe(200);
    const owner = moved.json() as { home: string; warnings: string[] };
    expect(owner.home).toBe('tyo');
    expect(owner.warnings).toHaveLength(1);
    expect(owner.warnings[0]).toMatch(/^owner beta: credits balance not carried from fra to tyo \(.*fra.*\): /);
    // Nothing at tyo: spends there start from the credits as set (1,000), more than the 990 left at fra.
    expect(await tyo.exists('keygate:{owner:beta}:credits')).toBe(0);
    await expect
      .poll(
        async () => ((await onB.call('GET', '/v1/owners/beta')).json() as { credits: { remaining: number } }).credits,
        PUBLISHED_WITHIN,
      )
      .toMatchObject({ remaining: 1000 });
    // The audit entry says so.
    await expect
      .poll(() => a.logs.some((l) => l.includes('"detail":"home=tyo; credits not carried"')), PUBLISHED_WITHIN)
      .toBe(true);

    // A key without an owner, through the key operations (the management API's PATCH answer reads the key's
    // usage in every region, which needs fra to answer: docs/regions.md).
    const ops = createKeyOperations({
      store: a.keygate.store,
      now: () => Date.now(),
      audit: () => {},
      regions: { self: 'fra', names: ['fra', 'tyo'], defaultHome: 'fra' },
    });
    const far = await ops.update('far', { home: 'tyo' }, 'test');
    expect(far.ok).toBe(true);
    if (!far.ok) return;
    expect(far.value.home).toBe('tyo');
    expect(far.warnings).toHaveLength(1);
    expect(far.warnings?.[0]).toMatch(/^key far: credits balance not carried from fra to tyo/);
    expect((await b.keygate.store.readKey('far'))?.record.home).toBe('tyo');

    // keygate keys says so too, on stderr, and moves the key.
    const viaCli = await cli('keys', 'update', 'cli-2', '--home', 'tyo');
    expect(viaCli.code, viaCli.err).toBe(0);
    expect(viaCli.err).toMatch(/^warning: key cli-2: credits balance not carried from fra to tyo \(/);
    expect(JSON.parse(viaCli.out)).toMatchObject({ home: 'tyo' });
  });
});
