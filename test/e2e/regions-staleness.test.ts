import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH, LONG_CACHE_TTL_MS, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';
import { until } from '../helpers/redis-topology.js';
import { PUBLIC_PATH, refusals, startRegions, type RegionsTopology } from '../helpers/regions.js';

/**
 * Regions, the keystore copy proven fresh (docs/regions.md): an instance reads its region's keystore replica and
 * hears its own heartbeats there. With replication broken (the replica promoted away from its master), or the
 * replica frozen, every authenticated request gets 503 keystore_stale within the bound plus the command timeout,
 * public routes keep answering, and it comes back once replication does. A revoke made on the master reaches
 * the instance through the replica.
 */
const SECRET = 'staleness-secret-0123456789abcdef';
const BOUND_MS = 600;
const call = (gate: RunningKeygate, t: string) =>
  send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });

describe('regions: a stale keystore copy refuses, a fresh one serves', () => {
  let topo: RegionsTopology;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let writer: RunningKeygate;
  beforeAll(async () => {
    topo = await startRegions(['fra', 'tyo']);
    upstream = await startRecordingUpstream();
    const keys = [makeKey({ apiKey: 'k1', secret: SECRET }), makeKey({ apiKey: 'k2', secret: SECRET })];
    // The writer writes through the keystore itself; the gate reads the replica, with a cache that never expires
    // in the test: a revoke reaches it only by the change feed on the replica.
    writer = await startKeygate({ upstream: upstream.url, env: topo.envOf('tyo', { replica: false }), keys });
    gate = await startKeygate({
      upstream: upstream.url,
      env: {
        ...topo.envOf('fra'),
        KEYGATE_KEYSTORE_MAX_STALENESS_MS: String(BOUND_MS),
        KEYGATE_KEY_CACHE_TTL_MS: String(LONG_CACHE_TTL_MS),
      },
    });
    await until('fresh', async () => (await call(gate, token('k1', SECRET))).status === 200, guard(20_000));
  }, guard(60_000));
  afterAll(async () => {
    for (const g of [gate, writer]) await g?.close();
    await upstream?.close();
    await topo?.stop();
  });

  it('replication broken: 503 keystore_stale within the bound + the command timeout, public route 200; back once replication is', async () => {
    const replica = await topo.connect(topo.replica);
    const before = await refusals(gate, 'keystore_stale');
    await replica.replicaof('NO', 'ONE');
    const cut = Date.now();
    try {
      await until(
        'keystore_stale',
        async () => (await call(gate, token('k1', SECRET))).status === 503,
        guard(BOUND_MS + 500 + 5_000),
      );
      expect(await refusals(gate, 'keystore_stale')).toBeGreaterThan(before);
      const r = await call(gate, token('k1', SECRET));
      expect(r.status).toBe(503);
      expect(r.headers['retry-after']).toBeDefined();
      expect((await send(gate.url, PUBLIC_PATH)).status).toBe(200);
      console.log(
        `[regions] keystore_stale ${Date.now() - cut} ms after replication was broken (bound ${BOUND_MS} ms)`,
      );
    } finally {
      await replica.replicaof('127.0.0.1', topo.keystore.port);
    }
    await until('fresh again', async () => (await call(gate, token('k1', SECRET))).status === 200, guard(20_000));
  });

  it('replica frozen (SIGSTOP): 503 keystore_stale; back after SIGCONT', async () => {
    expect((await call(gate, token('k1', SECRET))).status).toBe(200);
    topo.replica.pause();
    try {
      await until(
        'keystore_stale',
        async () => (await call(gate, token('k1', SECRET))).status === 503,
        guard(BOUND_MS + 500 + 5_000),
      );
      expect((await send(gate.url, PUBLIC_PATH)).status).toBe(200);
    } finally {
      topo.replica.resume();
    }
    await until('fresh again', async () => (await call(gate, token('k1', SECRET))).status === 200, guard(20_000));
  });

  it('a revoke made on the keystore master reaches the instance through its replica', async () => {
    expect((await call(gate, token('k2', SECRET))).status).toBe(200);
    await writer.keygate.store.putKey(makeKey({ apiKey: 'k2', secret: SECRET, state: 'revoked' }));
    await expect.poll(async () => (await call(gate, token('k2', SECRET))).status, PUBLISHED_WITHIN).toBe(404);
  });
});
