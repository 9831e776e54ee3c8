import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock.js';
import { createKeyOperations, type KeyOperations } from '../../src/operations/key-operations.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { createRedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/store/store.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, waitStoreReady, type RunningKeygate } from '../helpers/keygate.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { token } from '../helpers/tokens.js';

/**
 * Issue 27: two key changes released together, many rounds, against both stores. After each
 * round the key's final state is one the operations' semantics allow (revocation and deletion
 * win; of concurrent rotates every 200 returned a secret of one chain), a revoked or deleted key
 * never passes the proxy again, and every secret answered with 200 signs a request that passes
 * (and reaches the upstream as the key's id). With Redis the two calls come from two instances
 * (two stores, two connections), as two management servers would make them.
 */
const ROUNDS = Number(process.env.KEYGATE_RACE_ROUNDS ?? 15);
const GRACE_MS = 300_000;

type Outcome = { ok: boolean; secret?: string };
type Pair = {
  name: string;
  run(ops: [KeyOperations, KeyOperations], apiKey: string): Promise<[Outcome, Outcome]>;
  /** What the final state must be, given both outcomes. */
  expectFinal: 'revoked' | 'gone' | 'active';
};

const outcome = (r: { ok: boolean; value?: unknown }): Outcome => ({
  ok: r.ok,
  ...(r.ok && typeof (r.value as { secret?: unknown }).secret === 'string'
    ? { secret: (r.value as { secret: string }).secret }
    : {}),
});

const PAIRS: Pair[] = [
  {
    name: 'revoke × patch',
    expectFinal: 'revoked',
    run: async ([a, b], k) =>
      (await Promise.all([
        a.revoke(k, 'race', 'a'),
        b.update(k, { label: 'saved by the tenant', scopes: ['accounts:read', 'items:write'] }, 'b'),
      ]).then((rs) => rs.map(outcome))) as [Outcome, Outcome],
  },
  {
    name: 'delete × patch',
    expectFinal: 'gone',
    run: async ([a, b], k) =>
      (await Promise.all([a.remove(k, 'a'), b.update(k, { label: 'saved by the tenant' }, 'b')]).then((rs) =>
        rs.map(outcome),
      )) as [Outcome, Outcome],
  },
  {
    name: 'rotate × rotate',
    expectFinal: 'active',
    run: async ([a, b], k) =>
      (await Promise.all([a.rotate(k, GRACE_MS, 'a'), b.rotate(k, GRACE_MS, 'b')]).then((rs) => rs.map(outcome))) as [
        Outcome,
        Outcome,
      ],
  },
  {
    name: 'rotate × revoke',
    expectFinal: 'revoked',
    run: async ([a, b], k) =>
      (await Promise.all([a.rotate(k, GRACE_MS, 'a'), b.revoke(k, 'race', 'b')]).then((rs) => rs.map(outcome))) as [
        Outcome,
        Outcome,
      ],
  },
  {
    name: 'revoke × import --replace',
    expectFinal: 'revoked',
    run: async ([a, b], k) => {
      const current = await a.get(k);
      if (!current.ok) throw new Error('key vanished before the round');
      const imported = { ...current.value, label: 'imported' };
      return (await Promise.all([a.revoke(k, 'race', 'a'), b.importKeys([imported], true, 'b')]).then((rs) =>
        rs.map(outcome),
      )) as [Outcome, Outcome];
    },
  },
];

for (const kind of ['memory', 'redis'] as const) {
  describe(`key races (${kind} store): the final state is one the semantics allow, on the proxy too`, () => {
    let redis: TestRedis | undefined;
    let upstream: RecordingUpstream;
    let gate: RunningKeygate;
    let second: Store | undefined;
    let ops: [KeyOperations, KeyOperations];

    beforeAll(async () => {
      upstream = await startRecordingUpstream();
      const opsOn = (store: Store) => createKeyOperations({ store, now: () => Date.now(), audit: () => {} });
      if (kind === 'redis') {
        redis = await startRedis();
        gate = await startKeygate({ upstream: upstream.url, redisUrl: redis.url });
        second = createRedisStore({ url: redis.url }, { logger: pino({ level: 'silent' }) });
        await waitStoreReady(second);
        ops = [opsOn(gate.keygate.store), opsOn(second)];
      } else {
        const store = createMemoryStore({}, { clock: systemClock() });
        gate = await startKeygate({ upstream: upstream.url, store });
        ops = [opsOn(store), opsOn(store)];
      }
    });
    afterAll(async () => {
      await gate?.close();
      await second?.close();
      await upstream?.close();
      await redis?.stop();
    });

    /** The proxy's answer to a request signed with `secret`; a 200 must reach the upstream as the key's id. */
    async function proxied(apiKey: string, secret: string, id: string): Promise<number> {
      const before = upstream.received.length;
      const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(apiKey, secret)) });
      if (r.status === 200) {
        expect(upstream.received.length).toBe(before + 1);
        expect(upstream.received.at(-1)?.headers['x-api-key-id']).toBe(id);
      } else {
        expect(upstream.received.length).toBe(before);
      }
      return r.status;
    }

    for (const pair of PAIRS) {
      it(`${pair.name}: ${ROUNDS} rounds`, async () => {
        const tally = { firstOk: 0, secondOk: 0 };
        for (let round = 0; round < ROUNDS; round++) {
          const made = await ops[0].create({ scopes: ['accounts:read'], label: `round ${round}` }, 'setup');
          if (!made.ok) throw new Error('create failed');
          const { apiKey, secret: original, id } = made.value.record;
          await expect.poll(() => proxied(apiKey, original as string, id), { timeout: 3_000 }).toBe(200);

          const [first, second] = await pair.run(ops, apiKey);
          if (first.ok) tally.firstOk++;
          if (second.ok) tally.secondOk++;
          const final = await ops[0].get(apiKey);
          const where = `${pair.name}, round ${round}: ${JSON.stringify({ first: first.ok, second: second.ok })}`;

          if (pair.expectFinal === 'gone') {
            expect(final.ok, where).toBe(false);
          } else {
            expect(final.ok, where).toBe(true);
            if (final.ok) expect(final.value.state, where).toBe(pair.expectFinal);
          }
          const secrets = [original, first.secret, second.secret].filter((s): s is string => s !== undefined);
          if (pair.expectFinal === 'active') {
            // Of two concurrent rotates at least one answered 200, and every secret answered 200 passes.
            expect(first.ok || second.ok, where).toBe(true);
            for (const s of secrets)
              await expect.poll(() => proxied(apiKey, s, id), { timeout: 3_000, message: where }).toBe(200);
          } else {
            // Revoked or deleted: no secret the key ever had passes again, once the change is heard...
            for (const s of secrets)
              await expect.poll(() => proxied(apiKey, s, id), { timeout: 3_000, message: where }).not.toBe(200);
            // ...and it stays so.
            for (const s of secrets) expect(await proxied(apiKey, s, id), where).not.toBe(200);
          }
        }
        console.log(`[key-races] ${kind} ${pair.name}: ${ROUNDS} rounds, ${JSON.stringify(tally)} answered ok`);
      });
    }
  });
}
