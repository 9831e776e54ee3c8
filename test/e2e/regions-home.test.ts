import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { nowNonce, token } from '../helpers/tokens.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { guard } from '../helpers/slowdown.js';
import { until } from '../helpers/redis-topology.js';
import { refusals, startRegions, type RegionsTopology } from '../helpers/regions.js';

/**
 * Regions, the admit at home (docs/regions.md): two regions' request-state Redis on loopback, one instance in
 * each. A token is admitted at most once whichever instances it is sent to, its nonce lands on its home's Redis
 * only, a home that does not answer refuses its own keys (503 home_unreachable) and no other's, and a moved
 * home refuses the nonces the old home may have admitted (40106 home_moved).
 */
const SECRET = 'regions-secret-0123456789abcdef';
const call = (gate: RunningKeygate, t: string) =>
  send(gate.url, ACCOUNTS_PATH, { headers: bearer(t), timeoutMs: 5_000 });

describe('regions: the admit runs on the home region', () => {
  let topo: RegionsTopology;
  let upstream: RecordingUpstream;
  let a: RunningKeygate;
  let b: RunningKeygate;
  beforeAll(async () => {
    topo = await startRegions(['fra', 'tyo']);
    upstream = await startRecordingUpstream();
    const keys = [
      makeKey({ apiKey: 'at-fra', secret: SECRET, home: 'fra' }),
      makeKey({ apiKey: 'at-tyo', secret: SECRET, home: 'tyo' }),
      makeKey({ apiKey: 'no-home', secret: SECRET }),
    ];
    a = await startKeygate({ upstream: upstream.url, env: topo.envOf('fra'), keys });
    b = await startKeygate({ upstream: upstream.url, env: topo.envOf('tyo', { replica: false }) });
    // Both fresh: each has heard its own heartbeat back.
    for (const g of [a, b])
      await until('fresh', async () => (await call(g, token('at-fra', SECRET))).status === 200, guard(15_000));
  }, guard(60_000));
  afterAll(async () => {
    for (const g of [a, b]) await g?.close();
    await upstream?.close();
    await topo?.stop();
  });

  it('the same token sent to both regions at once is admitted at most once, for a key of either home', async () => {
    for (const apiKey of ['at-fra', 'at-tyo', 'no-home']) {
      for (let i = 0; i < 15; i++) {
        const t = token(apiKey, SECRET);
        const answers = await Promise.all([call(a, t), call(b, t), call(a, t), call(b, t)]);
        const ok = answers.filter((r) => r.status === 200).length;
        expect(ok, `${apiKey} token ${i}`).toBe(1);
        for (const r of answers) expect([200, 401]).toContain(r.status);
      }
    }
  });

  it("the nonce lands on the home's Redis, never on the other region's or the keystore", async () => {
    const fra = await topo.connect(topo.regions.fra!);
    const tyo = await topo.connect(topo.regions.tyo!);
    const keystore = await topo.connect(topo.keystore);
    const nonce = nowNonce();
    expect((await call(a, token('at-tyo', SECRET, { nonce }))).status).toBe(200);
    const name = `keygate:{at-tyo}:nonce:${nonce}`;
    expect(await tyo.exists(name)).toBe(1);
    expect(await fra.exists(name)).toBe(0);
    expect(await keystore.exists(name)).toBe(0);
    // A key written before regions: the default home (the first region listed).
    const n2 = nowNonce();
    expect((await call(b, token('no-home', SECRET, { nonce: n2 }))).status).toBe(200);
    expect(await fra.exists(`keygate:{no-home}:nonce:${n2}`)).toBe(1);
    expect(await tyo.exists(`keygate:{no-home}:nonce:${n2}`)).toBe(0);
  });

  it('a home whose Redis does not answer: 503 home_unreachable for its keys elsewhere, other keys unharmed', async () => {
    const before = await refusals(a, 'home_unreachable');
    topo.regions.tyo!.pause();
    try {
      const r = await call(a, token('at-tyo', SECRET));
      expect(r.status).toBe(503);
      expect(r.headers['retry-after']).toBeDefined();
      expect(await refusals(a, 'home_unreachable')).toBe(before + 1);
      expect((await call(a, token('at-fra', SECRET))).status).toBe(200);
    } finally {
      topo.regions.tyo!.resume();
    }
    await expect
      .poll(async () => (await call(a, token('at-tyo', SECRET))).status, { timeout: guard(10_000) })
      .toBe(200);
  });

  it('a moved home refuses nonces up to the move + the largest recv_window + the bound (40106 home_moved); a later nonce passes', async () => {
    // Moved 62 s ago: with the default policy's 60 s recv_window and the 1 s bound, nonces up to 1 s ago are refused.
    await b.keygate.store.putKey(
      makeKey({ apiKey: 'moved', secret: SECRET, home: 'tyo', homeMovedAtMs: Date.now() - 62_000 }),
    );
    const before = await refusals(b, 'home_moved');
    const old = await call(b, token('moved', SECRET, { nonce: nowNonce(-5_000) }));
    expect(old.status).toBe(401);
    expect((old.json() as { code: number }).code).toBe(40106);
    expect(await refusals(b, 'home_moved')).toBe(before + 1);
    expect((await call(b, token('moved', SECRET))).status).toBe(200);
  });
});
