import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegionsNet, type RegionsNet } from '../../scripts/harness/regions-net.mjs';
import {
  MAX_STALENESS_MS,
  REDIS_TIMEOUT_MS,
  startRegionsTopology,
  type RegionsTopology,
} from '../../scripts/harness/regions-topology.mjs';
import {
  createClient,
  makeKeys,
  measureKeystoreCut,
  measureLatency,
  measureLimits,
  measurePartition,
  measureReplay,
  measureRevocation,
  waitServed,
  type Client,
} from '../../scripts/harness/regions-measure.mjs';
import { requireRegionsNet } from '../helpers/regions-net.js';
import { guard } from '../helpers/slowdown.js';

/**
 * The staleness promise: a region refuses (or has the change) by the bound plus one Redis command timeout (the
 * heartbeat read that notices). The margin is a hang guard for a busy machine, scaled by the measured slowdown.
 */
const STALENESS_PROMISE_MS = MAX_STALENESS_MS + REDIS_TIMEOUT_MS + guard(1_000);

/**
 * Three simulated regions on this machine (docs/regions.md#measurements): the delay line joins their network
 * namespaces (45, 75, 100 ms one way), each region runs a request-state Sentinel group, its copy of the keystore
 * and two Keygate instances. The same measurements as `npm run regions`, with smaller counts; each assertion is
 * about what was answered, never how fast, except the staleness promise, whose bound comes from the timers.
 */
describe('three regions on one machine', () => {
  let net: RegionsNet;
  let topo: RegionsTopology;
  let client: Client;
  beforeAll(async () => {
    requireRegionsNet();
    net = await startRegionsNet({
      regions: ['fra', 'iad', 'tyo'],
      delaysMs: { 'fra-iad': 45, 'iad-tyo': 75, 'fra-tyo': 100 },
      deadlineSeconds: guard(600),
    });
    topo = await startRegionsTopology(net, { keystoreRegion: 'fra', timeoutMs: guard(90_000) });
    client = createClient(topo, { perRegionRate: 100, timeoutMs: guard(5_000) });
  }, guard(180_000));
  afterAll(async () => {
    await topo?.stop();
    await net?.stop();
  }, guard(60_000));

  it(
    'a key homed elsewhere costs at least one round trip to its home',
    async () => {
      const { rows } = await measureLatency(topo, client, { requests: 5 });
      console.log(`[regions] latency ${JSON.stringify(rows)}`);
      for (const row of rows) {
        expect(Number.isFinite(row.p50), `${row.instance} ${row.home}: no 200`).toBe(true);
        // A lower bound only: the admit runs on the home's Redis, across the link.
        expect(row.p50).toBeGreaterThanOrEqual(row.rttToHomeMs);
      }
    },
    guard(120_000),
  );

  it(
    'a revocation is in force at every instance within the staleness promise',
    async () => {
      const r = await measureRevocation(topo, client, { region: 'iad', count: 3, maxWaitMs: guard(10_000) });
      console.log(`[regions] revocation ${JSON.stringify(r)}`);
      expect(r.failures).toEqual([]);
      for (const v of Object.values(r.byRegion)) expect(v.max).toBeLessThanOrEqual(STALENESS_PROMISE_MS);
    },
    guard(120_000),
  );

  it(
    'a token sent to all six instances at once is admitted at most once, also while its home master is killed; separate regions admit it more than once',
    async () => {
      const keys = await makeKeys(topo, 'replay', 2, 'iad');
      for (const k of keys) await waitServed(client, topo.instances, k, guard(30_000));
      const plain = await measureReplay(client, topo.instances, keys, 30);
      const killed = await measureReplay(client, topo.instances, keys, 40, {
        during: { at: 10, action: () => topo.killRequestMaster('iad') },
      });
      await topo.importKeysSeparately(
        keys.map((k) => ({ apiKey: k.apiKey, apiSecret: k.apiSecret, scopes: ['accounts:read'] })),
      );
      const separate = await topo.startSeparateGates();
      const control = await measureReplay(client, separate, keys, 20);
      await Promise.all(separate.map((g) => g.stop()));
      console.log(`[regions] replay ${JSON.stringify({ plain, killed, control })}`);
      expect(plain.duplicates).toBe(0);
      expect(plain.admitted).toBeGreaterThan(0);
      expect(killed.duplicates).toBe(0);
      // The control: each region its own nonce set lets the same token in more than once. The test can fail.
      expect(control.duplicates).toBeGreaterThan(0);
    },
    guard(180_000),
  );

  it(
    'a key limited to 10/s burst 10, sent to from all six instances, is admitted exactly as one bucket allows',
    async () => {
      const r = await measureLimits(topo, client, { rate: 10, burst: 10, senderRate: 5, seconds: 8, home: 'tyo' });
      console.log(`[regions] limits ${JSON.stringify(r)}`);
      // The window's edges are known to within a round trip to the home at each end (the home's clock decides).
      const edges = 10 * ((2 * 200) / 1000);
      expect(r.admitted).toBeLessThanOrEqual(r.exact + edges);
      expect(r.admitted).toBeGreaterThanOrEqual(r.exact - edges - Object.values(r.other).reduce((a, b) => a + b, 0));
    },
    guard(120_000),
  );

  it(
    'a region cut off refuses within the promise, its keys are refused elsewhere, the others serve; after the heal replays and revokes hold',
    async () => {
      const r = await measurePartition(topo, client, { region: 'tyo', seconds: 5, settleMs: guard(8_000) });
      console.log(`[regions] partition ${JSON.stringify(r)}`);
      for (const row of r.rows) {
        if (row.what === 'cut region, own key' || row.what === 'elsewhere, key homed in cut region') {
          expect(row.all503AfterMs, `${row.instance} ${row.what}`).not.toBeNull();
          expect(row.all503AfterMs).toBeLessThanOrEqual(STALENESS_PROMISE_MS);
        } else expect(row.during['200'] ?? 0, `${row.instance}: its own keys kept being served`).toBeGreaterThan(0);
      }
      expect(Object.keys(r.rejectionsDuringCut)).toEqual(
        expect.arrayContaining(['50300 keystore_stale', '50300 home_unreachable']),
      );
      // 409 after a 503: an attempt the store did not confirm in time was written after all; acknowledged now.
      expect([200, 409]).toContain(r.revokeDuringCut);
      expect(Object.keys(r.replayedAfterHeal)).toEqual(['401 40106']);
      // Refused everywhere: 404 once an instance has the revoke, 503 while it cannot prove its copy fresh.
      for (const v of Object.values(r.revokedAfterHeal)) expect(['404 10013', '503 50300']).toContain(v);
    },
    guard(180_000),
  );

  it(
    "the keystore master's region cut off refuses once its master stops taking writes; a majority elsewhere promotes a master that takes key changes; nothing revoked comes back",
    async () => {
      // 30 s: a sentinel whose first failover attempt fails tries again after twice its failover-timeout (10 s).
      const r = await measureKeystoreCut(topo, client, { seconds: 30, settleMs: guard(15_000) });
      console.log(`[regions] keystore cut ${JSON.stringify(r)}`);
      for (const row of r.rows.filter((x) => x.instance.startsWith(`${r.region}-`))) {
        expect(row.all503AfterMs, row.instance).not.toBeNull();
      }
      expect(r.newMaster).not.toBe(r.oldMaster);
      // 409 after a 503: an attempt the store did not confirm in time was written after all; acknowledged now.
      expect([200, 409]).toContain(r.revokeDuringCut);
      for (const v of Object.values(r.revokedAfterHeal)) expect(['404 10013', '503 50300']).toContain(v);
    },
    guard(180_000),
  );
});
