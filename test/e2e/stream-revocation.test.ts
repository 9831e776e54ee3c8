import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeyOperations, type KeyOperations } from '../../src/operations/key-operations.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import {
  openStream,
  startWsUpstream,
  STREAM_SCOPE,
  writeStreamPolicy,
  type ClientStream,
} from '../helpers/ws-streams.js';

const SECRET = 'stream-secret-0123456789abcdef';
const KEYS = [
  'revoke-me',
  'delete-me',
  'unscope-me',
  'expire-me',
  'move-me',
  'bystander',
  'rotate-now',
  'rotate-grace',
];

/**
 * Two Keygates on one real Redis (replicas of one deployment): the stream is open on `b`, the key is
 * changed through `a`'s store. What closes the stream is the change message `b` hears: the key cache
 * TTL is 10 minutes and the idle timeout an hour, so no timer of Keygate's could do it instead.
 */
describe('a stream closes when its key stops being good, on another instance than the one that changed it', () => {
  let redis: TestRedis;
  let upstream: Awaited<ReturnType<typeof startWsUpstream>>;
  let a: RunningKeygate;
  let b: RunningKeygate;
  let ops: KeyOperations;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startWsUpstream();
    const env = {
      KEYGATE_CONFIG: writeStreamPolicy(),
      KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
      KEYGATE_STREAM_IDLE_TIMEOUT_MS: '3600000',
    };
    const keys = KEYS.map((apiKey) => makeKey({ apiKey, secret: SECRET, scopes: [STREAM_SCOPE, 'accounts:read'] }));
    a = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, keys, env });
    b = await startKeygate({ upstream: upstream.url, redisUrl: redis.url, env });
    ops = createKeyOperations({ store: a.keygate.store, now: () => Date.now(), audit: () => {} });
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await upstream?.close();
    await redis?.stop();
  });

  /** Opens a stream of `apiKey` on b and returns it with the upstream's side of it. */
  async function streamOnB(apiKey: string) {
    const before = upstream.connections.length;
    const stream = await openStream(b.url, apiKey, SECRET);
    await expect.poll(() => upstream.connections.length).toBe(before + 1);
    const upstreamSide = upstream.connections.find((c) => c.headers['x-api-key-id'] === `id-${apiKey}`);
    if (!upstreamSide) throw new Error('the upstream saw no stream for the key');
    return { stream, upstreamSide };
  }

  async function closedAfterChange(label: string, stream: ClientStream, changedAt: number) {
    const closed = await Promise.race([
      stream.closed,
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${label}: still open`)), PUBLISHED_WITHIN.timeout),
      ),
    ]);
    console.log(
      `[streams] ${label}: closed ${closed.at - changedAt} ms after the change returned on the other instance`,
    );
    return closed;
  }

  const closedTotal = async (reason: string) => {
    const text = await (await fetch(`${b.adminUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`keygate_streams_closed_total{reason="${reason}"}`));
    return Number(line?.split(' ')[1]);
  };

  it.each([
    ['revoke-me', 'revoked', () => ops.revoke('revoke-me', 'test', 'test')],
    ['delete-me', 'revoked', () => ops.remove('delete-me', 'test')],
    ['unscope-me', 'scope', () => ops.update('unscope-me', { scopes: ['accounts:read'] }, 'test')],
    ['move-me', 'scope', () => ops.update('move-me', { allowIps: ['10.9.8.7/32'] }, 'test')],
  ] as const)('%s: closed with 1008 to the client and to the upstream (reason %s)', async (apiKey, reason, change) => {
    const { stream, upstreamSide } = await streamOnB(apiKey);
    const bystander = await openStream(b.url, 'bystander', SECRET);
    const before = await closedTotal(reason);
    const result = await change();
    expect(result.ok).toBe(true);
    const closed = await closedAfterChange(apiKey, stream, Date.now());
    expect(closed.code).toBe(1008);
    expect(await upstreamSide.closed).toBe(1008);
    await expect.poll(() => closedTotal(reason)).toBe(before + 1);
    // Another key's stream is untouched.
    expect(bystander.ws.readyState).toBe(bystander.ws.OPEN);
    bystander.ws.close(1000);
    await bystander.closed;
  });

  it('a key whose expiry is moved close is closed at that expiry by the instance holding the stream', async () => {
    const { stream, upstreamSide } = await streamOnB('expire-me');
    const expiresAt = Date.now() + 1_500;
    const result = await ops.update('expire-me', { expiresAt: new Date(expiresAt).toISOString() }, 'test');
    expect(result.ok).toBe(true);
    // Still open before the expiry: the change itself admits the key.
    await new Promise((r) => setTimeout(r, 500));
    expect(stream.ws.readyState).toBe(stream.ws.OPEN);
    const closed = await closedAfterChange('expire-me (from its expiry)', stream, expiresAt);
    expect(closed.code).toBe(1008);
    expect(closed.at).toBeGreaterThanOrEqual(expiresAt);
    expect(await upstreamSide.closed).toBe(1008);
    expect(await closedTotal('expired')).toBe(1);
  });

  /** Opens a stream of `apiKey` signed with `secret` on `gate` and waits until the upstream holds it. */
  async function streamOn(gate: RunningKeygate, apiKey: string, secret: string) {
    const before = upstream.connections.length;
    const stream = await openStream(gate.url, apiKey, secret);
    await expect.poll(() => upstream.connections.length).toBe(before + 1);
    return { stream, upstreamSide: upstream.connections.at(-1) as (typeof upstream.connections)[number] };
  }

  it('a rotation with grace 0 closes the streams opened with the old secret, on both instances; one opened with the new secret stays open', async () => {
    const onA = await streamOn(a, 'rotate-now', SECRET);
    const onB = await streamOn(b, 'rotate-now', SECRET);
    const before = await closedTotal('rotated');
    const rotated = await ops.rotate('rotate-now', 0, 'test');
    expect(rotated.ok).toBe(true);
    const changedAt = Date.now();
    const fresh = rotated.ok ? (rotated.value.secret as string) : '';
    for (const [label, s] of [
      ['rotate-now on a', onA],
      ['rotate-now on b', onB],
    ] as const) {
      const closed = await closedAfterChange(`${label} (grace 0)`, s.stream, changedAt);
      expect(closed.code).toBe(1008);
      expect(await s.upstreamSide.closed).toBe(1008);
    }
    await expect.poll(() => closedTotal('rotated')).toBe(before + 1);
    // The new secret opens a stream that stays open past a change of the key that keeps it good.
    const renewed = await streamOn(b, 'rotate-now', fresh);
    expect((await ops.update('rotate-now', { label: 'still good' }, 'test')).ok).toBe(true);
    await new Promise((r) => setTimeout(r, 500));
    expect(renewed.stream.ws.readyState).toBe(renewed.stream.ws.OPEN);
    renewed.stream.ws.close(1000);
    await renewed.stream.closed;
  });

  it("the end of a rotation's grace closes the streams opened with the old secret; one opened with the new secret in the grace stays open", async () => {
    const old = await streamOn(b, 'rotate-grace', SECRET);
    const rotated = await ops.rotate('rotate-grace', 1_500, 'test');
    expect(rotated.ok).toBe(true);
    const value = rotated.ok ? rotated.value : undefined;
    const graceEnds = Date.parse(value?.previousSecretValidUntil ?? '');
    const fresh = await streamOn(b, 'rotate-grace', value?.secret as string);
    // Inside the grace the old secret still admits: its stream stays open, and a new one opens with it too.
    const alsoOld = await streamOn(a, 'rotate-grace', SECRET);
    await new Promise((r) => setTimeout(r, 300));
    expect(old.stream.ws.readyState).toBe(old.stream.ws.OPEN);
    for (const [label, s] of [
      ['rotate-grace on b', old],
      ['rotate-grace on a', alsoOld],
    ] as const) {
      const closed = await closedAfterChange(`${label} (from the grace's end)`, s.stream, graceEnds);
      expect(closed.code).toBe(1008);
      expect(closed.at).toBeGreaterThanOrEqual(graceEnds);
      expect(await s.upstreamSide.closed).toBe(1008);
    }
    expect(fresh.stream.ws.readyState).toBe(fresh.stream.ws.OPEN);
    fresh.stream.ws.close(1000);
    await fresh.stream.closed;
  });
});
