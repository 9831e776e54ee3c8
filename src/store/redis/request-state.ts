// Tested in test/e2e/admit-script.test.ts, test/e2e/store-contract.test.ts (both stores), test/e2e/usage-batching.test.ts, test/adversarial/redis-batching.test.ts.
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Clock } from '../../clock.js';
import type { KeyUsage } from '../../keys/key-usage.js';
import { parseOutcomeHash } from '../../keys/outcome-usage.js';
import { ADMITTED, REPLAY, type Admission, type Store } from '../store.js';
import { parseAdmissionReply, parseNonceReply } from './scripts/admission-reply.js';
import type { Charge } from '../budgets.js';
import { ADMIT_SCRIPT } from './scripts/admit-script.js';
import { CREDITS_COPY_SCRIPT, CREDITS_READ_SCRIPT, CREDITS_TOPUP_SCRIPT } from './scripts/credits-script.js';
import { MAX_CREDITS } from '../../keys/credits.js';
import type { CreditHolder, CreditState, CreditTarget } from '../store.js';
import { IP_BUDGET_SCRIPT } from './scripts/ip-budget-script.js';
import type { RedisConnections } from './connection/redis-connections.js';
import { createTurnBatch } from './turn-batch.js';
import type { Redis } from 'ioredis';
import { parseUsageHash, USAGE_FLUSH_SCRIPT } from './scripts/usage-flush-script.js';
import { createUsageWriter } from './usage-writer.js';

export interface RequestState {
  admit(apiKey: string, nonce: string, ttlMs: number, charge: Charge | undefined): Promise<Admission>;
  spendFailedAuth: Store['spendFailedAuth'];
  addCredits(target: CreditTarget, add: number): Promise<CreditState | undefined>;
  readCredits(target: CreditTarget): Promise<CreditState>;
  /** A balance's fields as stored (r, p, g, s, i), or undefined when it has none (or not all five): a home move's read. */
  readBalance(holder: CreditHolder): Promise<readonly string[] | undefined>;
  /** Replaces a balance with those fields (undefined: removes it), in one step: a home move's write. */
  writeBalance(holder: CreditHolder, fields: readonly string[] | undefined): Promise<void>;
  /** This process's own counts are written first, so its reads are exact; other replicas' within one interval. */
  getUsage(apiKey: string): Promise<KeyUsage>;
  countOutcome: Store['countOutcome'];
  /** Like getUsage: this process's own counts are written first. */
  getOutcomeUsage: Store['getOutcomeUsage'];
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
  client.defineCommand('keygateUsage', { numberOfKeys: 2, lua: USAGE_FLUSH_SCRIPT });
  // Top-ups and reads come from the key operations: their connection, as every operator's call.
  manager.defineCommand('keygateCreditsTopUp', { numberOfKeys: 1, lua: CREDITS_TOPUP_SCRIPT });
  manager.defineCommand('keygateCreditsRead', { numberOfKeys: 1, lua: CREDITS_READ_SCRIPT });
  manager.defineCommand('keygateCreditsCopy', { numberOfKeys: 1, lua: CREDITS_COPY_SCRIPT });
  const creditScripts = manager as unknown as {
    keygateCreditsTopUp(...args: Array<string | number>): Promise<number[]>;
    keygateCreditsRead(...args: Array<string | number>): Promise<number[]>;
    keygateCreditsCopy(...args: string[]): Promise<number>;
  };
  const scripts = client as unknown as {
    keygateAdmit(...args: Array<string | number>): Promise<number[]>;
    keygateUsage(...args: Array<string | number>): Promise<number>;
    keygateIpBudget(...args: Array<string | number>): Promise<[spent: number, blockedUs: number]>;
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
  /**
   * A credits balance lives beside the admit state it is spent with: a key's under its admit state
   * (`{<apiKey>}:credits`, or `{owner:<owner>}:key:<apiKey>:credits`), an owner's as `{owner:<owner>}:credits`.
   */
  const ownerCreditsName = (owner: string | undefined) => `${options.prefix}{owner:${owner}}:credits`;
  const creditsNameOf = (target: CreditTarget | CreditHolder) =>
    target.kind === 'owner' ? ownerCreditsName(target.owner) : `${admitStateOf(target.apiKey, target.owner)}credits`;
  /** The credits scripts' first arguments: the balance's name and the credits as set (credits-script.ts). */
  const creditArgs = (target: CreditTarget) => {
    const { spec } = target;
    return [creditsNameOf(target), spec.gen, spec.remaining, spec.amount, spec.interval] as const;
  };
  /** A credits script's reply: what is left and the seconds until the refill (-1: none). */
  const creditState = (reply: number[]): CreditState => ({ remaining: reply[0] ?? 0, refillInS: reply[1] ?? -1 });
  const admitArgs = (state: string, nonce: string, ttlMs: number, charge: Charge) => {
    const credits = charge.credits;
    const args: Array<string | number> = [1 + charge.budgets.length + (credits?.length ?? 0), `${state}nonce:${nonce}`];
    for (const b of charge.budgets)
      args.push(b.kind === 'key' ? `${state}budget` : `${options.prefix}{owner:${charge.owner}}:budget`);
    if (credits)
      for (const c of credits) args.push(c.kind === 'key' ? `${state}credits` : ownerCreditsName(charge.owner));
    args.push(ttlMs, charge.cost, charge.budgets.length);
    for (const b of charge.budgets) args.push(b.limit.intervalUs, b.limit.burst);
    if (credits) for (const { spec } of credits) args.push(spec.gen, spec.remaining, spec.amount, spec.interval);
    return args;
  };
  // The request path's nonce SET and admit script: written straight onto the command connection, every
  // one a loop turn issues in one write, answered through a callback (turn-batch.ts). A Cluster has no one
  // connection: ioredis's own commands (with its auto-pipelining) there.
  const turn = client.isCluster ? undefined : createTurnBatch(client as Redis);
  const nonceSet = turn?.nonceSet;
  const admitCall = turn?.scriptCall(ADMIT_SCRIPT, (args) => admitScript(...args));
  const usageScript = scripts.keygateUsage.bind(client);

  // Usage is counted in process and written in batches (usage-writer.ts); the mark field tells
  // this process's batches from other replicas' so a retried batch is applied once.
  const mark = `b:${randomBytes(6).toString('hex')}`;
  const usageOf = (kind: 'key' | 'owner', name: string) =>
    kind === 'key' ? stateOf(name) : `${options.prefix}{owner:${name}}:`;
  const usage = createUsageWriter(
    { flushMs: options.usageFlushMs ?? 1_000 },
    {
      clock: deps.clock,
      logger: deps.logger,
      // A key's batch on its own slot (its daily counts and its outcomes); an owner's on the owner's slot.
      write: (b, kind, oldest, nowMs) =>
        run(() =>
          usageScript(
            `${usageOf(kind, b.apiKey)}usage`,
            `${usageOf(kind, b.apiKey)}outcomes`,
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
      if (charge === undefined || (charge.budgets.length === 0 && charge.credits === undefined)) {
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
      const args = admitArgs(state, nonce, ttlMs, charge);
      if (admitCall !== undefined)
        return runCallback<number[], Admission>(
          (done) => admitCall(args, done),
          (reply) => counted(apiKey, parseAdmissionReply(reply), charge.cost),
        );
      return runThen(
        () => admitScript(...args),
        (reply) => counted(apiKey, parseAdmissionReply(reply), charge.cost),
      );
    },
    // The IP's own slot; a block is announced to every instance before the refusal is answered.
    spendFailedAuth: (ipKey, limit) =>
      run(async () => {
        const [spent, blockedUs] = await scripts.keygateIpBudget(
          `${options.prefix}{ipfail:${ipKey}}`,
          limit.intervalUs,
          limit.burst,
        );
        if (blockedUs > 0) await client.publish(options.ipChannel, `${ipKey} ${blockedUs}`);
        return { spent: spent === 1, blockedUs };
      }),
    addCredits: (target, add) =>
      run(async () => {
        const reply = await creditScripts.keygateCreditsTopUp(...creditArgs(target), add, MAX_CREDITS);
        return reply[0] === -1 ? undefined : creditState(reply);
      }),
    readCredits: (target) =>
      run(async () => creditState(await creditScripts.keygateCreditsRead(...creditArgs(target)))),
    readBalance: (holder) =>
      run(async () => {
        const fields = await manager.hmget(creditsNameOf(holder), 'r', 'p', 'g', 's', 'i');
        return fields.every((f): f is string => f !== null) ? fields : undefined;
      }),
    writeBalance: (holder, fields) =>
      run(async () => {
        await creditScripts.keygateCreditsCopy(creditsNameOf(holder), ...(fields ?? []));
      }),
    getUsage: async (apiKey) => {
      await usage.flush();
      return run(async () => parseUsageHash(await manager.hgetall(`${stateOf(apiKey)}usage`)));
    },
    countOutcome: (apiKey, owner, outcome) => usage.countOutcome(apiKey, owner, outcome),
    getOutcomeUsage: async (subject) => {
      await usage.flush();
      const name = 'apiKey' in subject ? stateOf(subject.apiKey) : usageOf('owner', subject.owner);
      return run(async () => parseOutcomeHash(await manager.hgetall(`${name}outcomes`)));
    },
    flushUsage: () => usage.flush(),
    // Another slot than the record, so after the commit (a leftover is harmless: nothing reads it without the record).
    drop: (apiKeys) =>
      run(async () => {
        for (const k of apiKeys) {
          usage.drop(k);
          // A key with an owner keeps its credits in its owner's slot, which this does not know: a leftover
          // balance there is never read again (a key re-created later is set with a newer setAt).
          await manager.del(
            `${stateOf(k)}budget`,
            `${stateOf(k)}tat`,
            `${stateOf(k)}usage`,
            `${stateOf(k)}outcomes`,
            `${stateOf(k)}credits`,
          );
        }
      }),
    close: () => usage.close(),
  };
}
