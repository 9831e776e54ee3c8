import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { echoRoundTrips, startRegionsNet, type RegionsNet } from '../../scripts/harness/regions-net.mjs';
import { requireRegionsNet } from '../helpers/regions-net.js';
import { guard } from '../helpers/slowdown.js';

const DELAYS = { 'a-b': 45, 'a-c': 75, 'b-c': 100 };

/**
 * The delay line itself (scripts/harness/delay-line.py): three namespaces joined through TUN devices, each link
 * holding every packet for its one-way delay, each link cut and healed on command.
 */
describe('the delay line between simulated regions', () => {
  let net: RegionsNet;
  beforeAll(async () => {
    requireRegionsNet();
    net = await startRegionsNet({ regions: ['a', 'b', 'c'], delaysMs: DELAYS, deadlineSeconds: guard(120) });
  }, guard(30_000));
  afterAll(async () => {
    await net?.stop();
  });

  it.each([
    ['a', 'b'],
    ['a', 'c'],
    ['b', 'c'],
    ['c', 'a'],
  ])('a round trip %s -> %s takes at least twice the link delay', async (from, to) => {
    const { rtts, error } = await echoRoundTrips(net, from, to, { rounds: 3, timeoutMs: guard(10_000) });
    expect(error).toBeUndefined();
    console.log(`[regions] echo ${from}->${to}: ${rtts!.map((r) => r.toFixed(1)).join(' ')} ms`);
    // A lower bound only: a busy machine adds time, never removes it.
    for (const rtt of rtts!) expect(rtt).toBeGreaterThanOrEqual(2 * net.delayMs(from, to));
  });

  it('a cut link passes nothing, both ways, until it is healed; other links keep passing', async () => {
    await net.cut('a', 'b');
    try {
      const before = await net.stats();
      const [ab, ba, ac] = await Promise.all([
        echoRoundTrips(net, 'a', 'b', { rounds: 1, timeoutMs: 1_500, port: 7101 }),
        echoRoundTrips(net, 'b', 'a', { rounds: 1, timeoutMs: 1_500, port: 7102 }),
        echoRoundTrips(net, 'a', 'c', { rounds: 1, timeoutMs: guard(10_000), port: 7103 }),
      ]);
      expect(ab.error).toBe('timeout');
      expect(ba.error).toBe('timeout');
      expect(ac.rtts).toHaveLength(1);
      const after = await net.stats();
      expect(after.passed['a-b'] ?? 0).toBe(before.passed['a-b'] ?? 0);
      expect(after.dropped['a-b'] ?? 0).toBeGreaterThan(before.dropped['a-b'] ?? 0);
    } finally {
      await net.heal('a', 'b');
    }
    const healed = await echoRoundTrips(net, 'a', 'b', { rounds: 1, timeoutMs: guard(10_000), port: 7104 });
    expect(healed.rtts).toHaveLength(1);
  });

  it('isolating a region cuts it from the other regions but not from the root namespace', async () => {
    await net.isolate('c');
    try {
      const [ca, cb] = await Promise.all([
        echoRoundTrips(net, 'a', 'c', { rounds: 1, timeoutMs: 1_500, port: 7201 }),
        echoRoundTrips(net, 'c', 'b', { rounds: 1, timeoutMs: 1_500, port: 7202 }),
      ]);
      expect(ca.error).toBe('timeout');
      expect(cb.error).toBe('timeout');
      const fromRoot = await new Promise<string>((resolve) => {
        const s = connect(5999, net.address('c'));
        s.setTimeout(guard(5_000), () => resolve('timeout'));
        s.once('connect', () => resolve('connected'));
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
      }).finally(() => undefined);
      // Nothing listens on that port: a refused connection is the namespace answering across its root link.
      expect(fromRoot).toBe('ECONNREFUSED');
    } finally {
      await net.rejoin('c');
    }
    expect(
      (await echoRoundTrips(net, 'c', 'a', { rounds: 1, timeoutMs: guard(10_000), port: 7203 })).rtts,
    ).toHaveLength(1);
  });
});
