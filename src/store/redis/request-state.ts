// Tested in test/e2e/admit-script.test.ts, test/e2e/store-contract.test.ts (both stores), test/e2e/usage-batching.test.ts, test/adversarial/redis-batching.test.ts.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { KeyUsage } from '../../keys/key-usage.js';
import { ADMITTED, REPLAY, type Admission, type Store } from '../store.js';
import { parseAdmissionReply, parseNonceReply } from './scripts/admission-reply.js';
import type { Charge } from '../budgets.js';
import { ADMIT_SCRIPT } from './scripts/admit-script.js';
import { IP_BUDGET_SCRIPT } from './scripts/ip-budget-script.js';
import type { RedisConnections } from './connection/redis-connections.js';
import { createNonceSet } from './turn-batch.js';
import type { Redis } from 'ioredis';
import { parseUsageHash, USAGE_FLUSH_SCRIPT } from './scripts/usage-flush-script.js';
import { createUsageWriter } from './usage-writer.js';

export interface RequestState {
  admit(apiKey: string, nonce: string, ttlMs: number, charge: Charge | undefined): Promise<Admission>;
  spendFailedAuth: Store['spendFailedAuth'];
  /** This process's own counts are written first, so its reads are exact; other replicas' within one interval. */
  getUsage(apiKey: string): Promise<KeyUsage>;
  flushUsage(): Promise<void>;
  /** A deleted key's rate-limit state and usage, also what this process has not written yet. */
  drop(apiKeys: readonly string[]): Promise<void>;
  /** Writes what is pending, then stops the flush timer. */
  close(): Promise<void>;
}

/**
 * The request path's state of each key in Redis: the replay guard's nonces, the GCRA state and the usage
 * counts, all under `{prefix}{<apiKey>}:` (one Cluster slot per key, redis-store.ts has the layout); a key
 * with an owner keeps its nonces and TAT in its owner's slot instead (`admitStateOf`).
 * `admit` is one round trip: the nonce's SET NX (batched per loop turn, turn-batch.ts) for a request no
 * budget applies to, the admit script otherwise. Usage is counted in process and written in batches
 * (usage-writer.ts). The failed-authentication budget per IP is one script on the IP's own slot; a block
 * is published on `ipChannel` (ip-block-listener.ts hears it on every instance).
 */
export function createRequestState(
  options: { prefix: string; ipChannel: string; usageFlushMs?: number },
  deps: { connections: RedisConnections; clock: Clock; logger: Logger },
): RequestState {
  const { client, manager, run, runThen, runCallback } = deps.connections;
  // The {…} hash tag puts every name of one key's request-path state in one Cluster slot.
  const stateOf = (apiKey: string) => `${options.prefix}{${apiKey}}:`;
  client.defineCommand('keygateAdmit', { lua: ADMIT_SCRIPT }); // numkeys first: 1 + one per budget
  client.defineCommand('keygateIpBudget', { numberOfKeys: 1, lua: IP_BUDGET_SCRIPT });
  client.defineCommand('keygateUsage', { numberOfKeys: 1, lua: USAGE_FLUSH_SCRIPT });
  const scripts = client as unknown as {
    keygateAdmit(...args: Array<string | number>): Promise<number[]>;
    keygateUsage(...args: Array<string | number>): Promise<number>;
    keygateIpBudget(...args: Array<string | number>): Promise<number>;
  };
  const admitScript = scripts.keygateAdmit.bind(client);
  /**
   * Where the admit step's names live: a key without an owner keeps its nonces and TAT
   * under {<apiKey>} as before; a key with an owner keeps them under {owner:<owner>}, the slot of its
   * owner's bucket, so one script sees every budget of the request (one round trip, all or nothing,
   * also on a Cluster). An owner never changes after creation, so a key's nonces never move.
   */
  const admitStateOf = (apiKey: string, owner: string | undefined) =>
    owner === undefined ? stateOf(apiKey) : `${options.prefix}{owner:${owner}}:key:${apiKey}:`;
  const admitArgs = (state: string, nonce: string, ttlMs: number, charge: Charge) => {
    const args: Array<string | number> = [1 + charge.budgets.length, `${state}nonce:${nonce}`];
    for (const b of charge.budgets)
      args.push(b.kind === 'key' ? `${state}budget` : `${options.prefix}{owner:${charge.owner}}:budget`);
    args.push(ttlMs, charge.cost);
    for (const b of charge.budgets) args.push(b.limit.intervalUs, b.limit.burst);
    return args;
  };
  // The request path's nonce SET: written straight onto the command connection, every one a loop
  // turn issues in one write, answered through a callback (turn-batch.ts). A Cluster has no one
  // connection: ioredis's own command (with its auto-pipelining) there.
  const nonceSet = client.isCluster ? undefined : createNonceSet(client as Redis);
  const usageScript = scripts.keygateUsage.bind(client);

  // Usage is counted in process and written in batches (usage-writer.ts); the mark field tells
  // this process's batches from other replicas' so a retried batch is applied once.
  const mark = `b:${randomBytes(6).toString('hex')}`;
  const usage = createUsageWriter(
    { flushMs: options.usageFlushMs ?? 1_000 },
    {
      clock: deps.clock,
      logger: deps.logger,
      write: (b, oldest, nowMs) =>
        run(() =>
          usageScript(
            `${stateOf(b.apiKey)}usage`,
            mark,
            b.seq,
            b.usage.lastUsedAtMs,
            oldest,
            nowMs,
            ...[...b.usage.perDay].flat(),
          ),
        ),
    },
  );
  /** An admission that came in time, with its usage counted: mapped inside the deadline's one promise. */
  const counted = (apiKey: string, admission: Admission, cost?: number) => {
    if (admission.outcome === 'admitted') usage.count(apiKey, cost);
    return admission;
  };

  return {
    admit: (apiKey, nonce, ttlMs, charge) => {
      const state = admitStateOf(apiKey, charge?.owner);
      // A request no budget applies to needs only the nonce's SET NX: no script, no TIME.
      // The reply is parsed and counted in the deadline's own promise: no .then chain per request.
      if (charge === undefined || charge.budgets.length === 0) {
        const key = `${state}nonce:${nonce}`;
        if (nonceSet !== undefined)
          return runCallback<boolean, Admission>(
            (done) => nonceSet(key, ttlMs, done),
            (first) => counted(apiKey, first ? ADMITTED : REPLAY, charge?.cost),
          );
        return runThen(
          () => client.call('set', key, '1', 'PX', ttlMs, 'NX'),
          (reply) => counted(apiKey, parseNonceReply(reply as string | null), charge?.cost),
        );
      }
      return runThen(
        () => admitScript(...admitArgs(state, nonce, ttlMs, charge)),
        (reply) => counted(apiKey, parseAdmissionReply(reply), charge.cost),
      );
    },
    // The IP's own slot; a block is announced to every instance before the refusal is answered.
    spendFailedAuth: (ipKey, limit) =>
      run(async () => {
        const blockedUs = await scripts.keygateIpBudget(
          `${options.prefix}{ipfail:${ipKey}}`,
          limit.intervalUs,
          limit.burst,
        );
        if (blockedUs > 0) await client.publish(options.ipChannel, `${ipKey} ${blockedUs}`);
        return blockedUs;
      }),
    getUsage: async (apiKey) => {
      await usage.flush();
      return run(async () => parseUsageHash(await manager.hgetall(`${stateOf(apiKey)}usage`)));
    },
    flushUsage: () => usage.flush(),
    // Another slot than the record, so after the commit (a leftover is harmless: nothing reads it without the record).
    drop: (apiKeys) =>
      run(async () => {
        for (const k of apiKeys) {
          usage.drop(k);
          await manager.del(`${stateOf(k)}budget`, `${stateOf(k)}tat`, `${stateOf(k)}usage`);
        }
      }),
    close: () => usage.close(),
  };
}
