// Tested in test/e2e/store-contract.test.ts (the contract, run against both stores).
import type { KeyRecord } from '../keys/key-record.js';
import type { KeyUsage } from '../keys/key-usage.js';
import type { Outcome, OutcomeRings } from '../keys/outcome-usage.js';
import type { OwnerRecord } from '../keys/owner-record.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { Charge } from './budgets.js';
import type { AuditEntry, KeyCommit, KeyWriteResult, VersionedKey } from './key-write.js';

export type { AuditEntry } from './key-write.js';
import type { AuditRecord } from './audit-entry.js';
import type { WebhookQueue } from './webhook-queue.js';

/** Where an audit read starts: `after` a cursor (exclusive), else at `sinceMs`; how many stream entries it reads. */
export interface AuditRange {
  readonly after?: string | undefined;
  readonly sinceMs?: number | undefined;
  readonly count: number;
}
export type { Budget, BudgetKind, Charge, CreditCharge } from './budgets.js';
import type { RateState } from './rate-limit.js';
import type { CreditState } from './credits.js';
export type { CreditState } from './credits.js';
import type { CompiledCredits } from '../keys/credits.js';

/** Thrown by a store that cannot answer (Redis down, slow or erroring). Maps to 503. */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  /** The refusal reason the request path answers it with (a 503 of its own kind, src/errors.ts). */
  readonly reason: 'store_unavailable' | 'keystore_stale' | 'home_unreachable' = 'store_unavailable';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * Regions (docs/regions.md): this instance has not heard its own keystore heartbeat back on its region's keystore
 * replica within KEYGATE_KEYSTORE_MAX_STALENESS_MS, so a revocation may not have reached it: every admit is refused.
 */
export class KeystoreStaleError extends StoreUnavailableError {
  override readonly reason = 'keystore_stale';
}

/** Regions: the request-state Redis of the key's home region did not answer (or is fenced): nothing admitted on a guess. */
export class HomeUnreachableError extends StoreUnavailableError {
  override readonly reason = 'home_unreachable';
}

/**
 * Thrown (by the Redis store: store/redis/connection/redis-durability.ts) when a key change was written to the Redis
 * master but fewer replicas than KEYGATE_REDIS_MIN_REPLICAS acknowledged it in time. The change may or may not survive a
 * failover; retrying the same operation is safe. A StoreUnavailableError, so every caller that
 * does not know durability still fails closed (503); the management API and the CLI name it.
 */
export class DurabilityError extends StoreUnavailableError {
  constructor(
    readonly required: number,
    readonly acknowledged: number,
    options?: { cause?: unknown },
  ) {
    super(
      `durability: ${acknowledged} of the ${required} required Redis replica(s) acknowledged the change in time; it may or may not survive a failover (retry the same operation)`,
      options,
    );
  }
}

/**
 * Thrown (by the Redis store: store/redis/connection/redis-server-checks.ts) for every request while the Redis
 * server's maxmemory-policy is not noeviction: Redis may evict nonces, and a token would then be
 * admitted twice. A StoreUnavailableError (503); /readyz names it `redis_may_evict`.
 */
export class RedisMayEvictError extends StoreUnavailableError {
  constructor(readonly policy: string) {
    super(
      `redis maxmemory-policy is ${policy}: Redis may evict nonces, and a token would then be admitted twice. ` +
        'Set maxmemory-policy noeviction, or accept the risk with KEYGATE_ALLOW_EVICTING_REDIS=true',
    );
  }
}

/**
 * What the store decided for a request whose signature verified:
 *   admitted — every budget had room for the cost and the nonce is new (cost spent from every
 *              budget, nonce recorded, usage counted);
 *   replay   — the nonce was already used (nothing written, no allowance spent);
 *   limited  — some budget lacks room for the cost (nothing written in any budget: the token is
 *              not burned and may be retried); `refusedBy` is the first such budget's index.
 *   exhausted — every budget had room but some credits lack the cost (nothing written anywhere: no
 *              budget, no credits, no nonce); `refusedBy` is the first such credits' index in the charge.
 * `rate` has one state per budget of the charge, in its order; undefined when no budget applies.
 * `credits` has one state per credits of the charge, in its order; absent when none applies. `drained`
 * (admitted only, absent when 0): bit j set when credits j reached zero with this spend, reported once per
 * transition by the step that made it (the store's atomic step), so every instance together reports it once.
 */
export type Admission =
  | {
      readonly outcome: 'admitted';
      readonly rate: readonly RateState[] | undefined;
      readonly credits?: readonly CreditState[];
      readonly drained?: number;
    }
  | { readonly outcome: 'replay' }
  /** Regions: the key's home moved and the nonce is not after the move's cut-off (docs/regions.md): nothing written. */
  | { readonly outcome: 'home_moved' }
  /** Regions: the nonce is older than the last failover of its home's request-state group (replay fence). */
  | { readonly outcome: 'fenced' }
  | { readonly outcome: 'limited'; readonly refusedBy: number; readonly rate: readonly RateState[] }
  | {
      readonly outcome: 'exhausted';
      readonly refusedBy: number;
      readonly rate: readonly RateState[];
      readonly credits: readonly CreditState[];
    };

// Shared answers of both stores: a request no budget applies to allocates nothing for its verdict.
export const ADMITTED: Admission = Object.freeze({ outcome: 'admitted', rate: undefined });
export const REPLAY: Admission = Object.freeze({ outcome: 'replay' });
export const HOME_MOVED: Admission = Object.freeze({ outcome: 'home_moved' });

/** A key change announced to every running instance (`null` = everything may have changed). */
export type KeyChangeListener = (apiKey: string | null) => void;

/** Which keys a page holds: at most `limit`, in apiKey order, those after `after`, only `owner`'s when given. */
export interface KeyPageQuery {
  readonly owner?: string;
  /** The last apiKey of the previous page (it need not exist any more). */
  readonly after?: string;
  readonly limit: number;
}

/** One page of keys; `more` is true when keys follow its last one. */
export interface KeyPage {
  readonly records: readonly KeyRecord[];
  readonly more: boolean;
}

/**
 * What the request path and the CLI need from a store. Two implementations:
 * memory (embedded default, one process) and Redis (shared by replicas).
 * Both pass the same contract suite (test/e2e/store-contract.test.ts).
 *
 * The request path calls getKey, admit, countKeys, ping; the key operations (management API and
 * CLI) call readKey, listKeys, commitKeyChanges, appendAudit, getUsage. Redis runs the
 * two groups on separate connections, so a slow management call never holds a proxy request.
 */
/** Why a store's connection is down, in its backend's terms (Redis: store/redis/connection/redis-reachability.ts). */
export interface ConnectionProblem {
  /** `refused`, `dns`, `unreachable`, `timeout`, `tls`, `reset`, `auth`, `protocol` or `other`. */
  readonly cause: string;
  /** The client library's message (an address, a Redis error reply: never a password). */
  readonly err: string;
}

/** The key records: what the key operations, the key cache and the change listeners read and write. */
export interface KeyRecordStore {
  /** The request path's read (a key-cache miss). */
  getKey(apiKey: string): Promise<KeyRecord | null>;
  /** The record with its version, for a compare-and-set (commitKeyChanges). */
  readKey(apiKey: string): Promise<VersionedKey | null>;
  /**
   * The owner ('' for none) of a key deleted less than DELETED_OWNER_KEPT_MS ago, when the store keeps a
   * key's nonces under its owner (Redis): a re-creation under another owner would forget them, so the key
   * operations refuse it meanwhile. undefined: none known (the memory store keeps nonces by apiKey alone).
   */
  deletedOwner(apiKey: string): Promise<string | undefined>;
  /**
   * One page of keys from the store's indexes (every key, and each owner's, ordered by apiKey, kept
   * in the same atomic step as the record): reads only that page, whatever the number of keys.
   */
  listKeys(query: KeyPageQuery): Promise<KeyPage>;
  /**
   * Every key change an operator makes: the writes checked (version, revocation wins, ids
   * unique) and applied with their audit entries and change messages in one atomic step,
   * all or nothing (key-write.ts), with the commit's claim if it has one (an Idempotency-Key, shared
   * by every instance in Redis). A deleted key's rate-limit state and usage go too.
   */
  commitKeyChanges(commit: KeyCommit): Promise<KeyWriteResult>;
  /** Writes a record unconditionally, without audit: seeding a store (tests), never an operator's change. */
  putKey(record: KeyRecord): Promise<void>;
  /** Deletes unconditionally, without audit; false when no such key existed. Also drops rate-limit state and usage. */
  deleteKey(apiKey: string): Promise<boolean>;
  /**
   * When a key was last admitted and its per-day counts (the last USAGE_DAYS days). Redis: exact for
   * this process's own requests (it flushes first), other replicas' counts are at most one flush late.
   */
  getUsage(apiKey: string): Promise<KeyUsage>;
  /**
   * Writes the usage this process counted and has not stored yet. Redis counts usage in process and
   * writes it once a second (and on close); rejects with StoreUnavailableError when a write failed
   * (the counts are kept for the next flush). Memory: nothing to do, its counts are exact at once.
   */
  flushUsage(): Promise<void>;
  /** Subscribes to key changes made by any instance; returns an unsubscribe function. */
  onKeyChange(listener: KeyChangeListener): () => void;
  /**
   * True while every key change is certain to reach onKeyChange listeners: always for the memory
   * store (changes are emitted in-process); for Redis, once the SUBSCRIBE reply has arrived and the
   * subscriber connection has not dropped since. A key cache keeps entries past its TTL only while
   * this holds. Losing it is followed, before it can become true again, by a flush (`null`): the
   * Redis store flushes whenever a connection comes back, since changes made meanwhile were not heard.
   */
  subscribed(): boolean;
  /**
   * False when no key by this name exists as far as this instance's change messages tell, answered
   * without a store read; true when one may exist (or the store cannot tell). Exactly as current as a
   * key cache's negative entry: a create elsewhere is known once its change message arrives. The key
   * cache asks before a read, so a flood of unknown names costs no Redis round trip.
   * Redis only (known-keys.ts, while subscribed); the memory store's reads cost no round trip.
   */
  mayHaveKey?(apiKey: string): boolean;
  /** Appends an audit entry of what changes no key (an export) to the stream `keygate:{keystore}:audit`; no-op in memory. */
  appendAudit(entry: AuditEntry): Promise<void>;
  /**
   * Audit entries oldest first, at most `range.count`: after the cursor `range.after` (exclusive), else
   * from `range.sinceMs`, else from the oldest kept. Redis: XRANGE on the stream (the management
   * connection); memory: none (it keeps no audit log, see memory-store.ts). An entry that
   * does not parse is skipped, its cursor still counted (the reader's paging moves past it).
   */
  readAudit(range: AuditRange): Promise<{ readonly records: readonly AuditRecord[]; readonly last?: string }>;
  /**
   * The apiKey whose record holds this secret (its current one or one in its grace), found by the
   * secret's keyed fingerprint (keys/secret-fingerprint.ts), never by reading keys; null when none.
   * Redis only: the memory store's keys come from the keys file, where a leaked key is removed by hand.
   */
  keyOfSecret?(secret: string): Promise<string | null>;
}

/** A request's admission: what authentication (pipeline/authenticate.ts) asks of the store. */
export interface AdmissionStore {
  /**
   * The request path's one store call, atomic and (in Redis) one round trip:
   * every budget of the charge checked for its cost, all or nothing (GCRA on the store's clock,
   * budgets.ts; none when `charge` is undefined or has no budgets), then the nonce (recorded for
   * `ttlMs` if new), then usage (lastUsedAt, count for today; Redis writes it in batches, see
   * flushUsage). The charge's owner says where a key's state lives (Redis: its owner's hash slot).
   * See Admission for what each outcome wrote.
   */
  admit(
    apiKey: string,
    nonce: string,
    ttlMs: number,
    charge: Charge | undefined,
    /** The key's record and the nonce as a time: where the admit runs when regions are on (docs/regions.md). */
    record?: KeyRecord,
    nonceNs?: bigint,
  ): Admission | Promise<Admission>;
}

/** What one spend from an IP's failed-authentication budget found (IpBudgetStore.spendFailedAuth). */
export interface IpSpend {
  /** The budget had room for this failure (false: it was empty, nothing was spent). */
  readonly spent: boolean;
  /** How long from now the budget has no room for one more failure, in µs (0: not empty). */
  readonly blockedUs: number;
}

/** The failed-authentication budgets per client IP (pipeline/ip-budget.ts). */
export interface IpBudgetStore {
  /**
   * The failed-authentication budget per client IP (src/pipeline/ip-budget.ts): spends 1
   * from `ipKey`'s budget if it has room (GCRA on the store's clock, budgets.ts `spendFailure`) and
   * answers whether it had (`spent`: false when the budget was already empty) and how long from now it
   * has none, in µs (`blockedUs`, 0: not empty). Redis: one script on the IP's own slot, and a block is
   * announced to every instance (onIpBlocked) before this resolves.
   */
  spendFailedAuth(ipKey: string, limit: CompiledLimit): Promise<IpSpend>;
  /** Blocks announced by any instance (Redis only; the memory store's one process hears its own replies). */
  onIpBlocked?(listener: (ipKey: string, blockedUs: number) => void): () => void;
}

/** Owners' own settings and budgets (operations/owner-operations.ts, the request path's owner limits). */
export interface OwnerStore {
  /** An owner's own settings, or null when it has none (the management connection in Redis). */
  readOwner(owner: string): Promise<OwnerRecord | null>;
  /** Every owner with settings of its own, by name. */
  listOwners(): Promise<readonly OwnerRecord[]>;
  /**
   * Sets an owner's settings (a record without a rateLimit removes them) with its audit entry, in one
   * atomic step announced to every instance (Redis: the owners hash, the audit stream and the change
   * message in one script on the {keystore} slot, acknowledged like a key change). Memory: in this
   * process only (the keys file's `owners:` replaces them on reload).
   */
  putOwner(record: OwnerRecord, audit: AuditEntry | undefined): Promise<void>;
  /**
   * The request path's read of an owner's own limit, compiled (undefined: none of its own), answered
   * from this instance's table without a store call. Redis keeps the table from the owners hash, read
   * whole before the first key is read and on every flush, and per owner on its change message; a read
   * that fails is retried until it succeeds, and meanwhile this throws StoreUnavailableError (503).
   */
  ownerLimit(owner: string): CompiledLimit | undefined;
  /**
   * What is left of an owner's budget under `limit` now, spending nothing (the console, GET
   * /v1/owners/{owner}): read from the owner's GCRA state on the store's clock (Redis: TIME and GET
   * in one script on the owner's slot, the management connection).
   */
  ownerBudget(owner: string, limit: CompiledLimit): Promise<RateState>;
}

/** Whose usage by outcome: a key's, or an owner's (the sum over its keys, kept at write time). */
export type UsageSubject = { readonly apiKey: string } | { readonly owner: string };

/** Usage by outcome (keys/outcome-usage.ts): counted by the request record, read by the key operations. */
export interface OutcomeStore {
  /**
   * Counts one answered request of a key whose signature verified, under the key and, when it has one,
   * its owner: an increment in this process, written off the request path (Redis: with the daily counts,
   * in the same batches; memory: folded into the rings once a second and before a read).
   */
  countOutcome(apiKey: string, owner: string | undefined, outcome: Outcome): void;
  /** The subject's rings; this process's own counts are written first (other replicas' at most one flush late). */
  getOutcomeUsage(subject: UsageSubject): Promise<OutcomeRings>;
}

/** Whose credits a top-up or a read names: a key's (where its admit state lives: its owner's slot if it has one) or an owner's. */
export type CreditTarget =
  | {
      readonly kind: 'key';
      readonly apiKey: string;
      readonly owner: string | undefined;
      /** Regions: the key's own home (its record's), where a key without an owner keeps its balance. */
      readonly home?: string | undefined;
      readonly spec: CompiledCredits;
    }
  | { readonly kind: 'owner'; readonly owner: string; readonly spec: CompiledCredits };

/** Whose balance a home move carries: a key's (under its owner's slot if it has one) or an owner's. */
export type CreditHolder =
  | { readonly kind: 'key'; readonly apiKey: string; readonly owner: string | undefined }
  | { readonly kind: 'owner'; readonly owner: string };

/** Credits outside the request path: what the key operations read and top up. */
export interface CreditStore {
  /**
   * Adds `add` to the balance in one atomic step with the admit step's own (Redis: a script on the admit
   * state's slot, HINCRBY-like: a top-up racing requests loses nothing); a refill that came due is applied
   * first. Answers the new state, or undefined when the sum would pass MAX_CREDITS (nothing changed).
   */
  addCredits(target: CreditTarget, add: number): Promise<CreditState | undefined>;
  /** What is left now and when it is refilled, spending nothing. */
  readCredits(target: CreditTarget): Promise<CreditState>;
  /** An owner's credits, compiled (undefined: none), from this instance's owner table (as ownerLimit). */
  ownerCredits(owner: string): CompiledCredits | undefined;
  /**
   * Regions (docs/regions.md "Moving a home"): copies each holder's balance from the request-state Redis of
   * region `from` to that of `to`, before the move is written. Each balance is read at `from` and written at
   * `to` in one atomic step, its fields as they are (none at `from`: none at `to` either, so an earlier stay's
   * balance there is never spent again). Rejects with StoreUnavailableError, naming the region, when either
   * does not answer (the balances before the failing one are copied). Absent where there are no regions:
   * the memory store, and a Redis store opened without them (`keygate keys`).
   */
  moveCredits?(holders: readonly CreditHolder[], from: string, to: string): Promise<void>;
}

/** Whether the store can serve: what /readyz (observe/readiness.ts) reads. */
export interface HealthStore {
  /** Resolves when the store answers; rejects with StoreUnavailableError otherwise. */
  ping(): Promise<void>;
  /** How many keys the store holds (any state); /readyz is 503 "no_keys" at 0 with KEYGATE_READY_REQUIRES_KEYS. */
  countKeys(): Promise<number>;
  /**
   * Redis: resolves when the server's settings allow serving requests (read at connect and every few
   * seconds, redis-server-checks.ts); rejects with RedisMayEvictError (/readyz `redis_may_evict`) or
   * StoreUnavailableError (not read yet). Absent: nothing to check.
   */
  servable?(): Promise<void>;
  /** Redis: why the request path's connection is down (/readyz `redis_unreachable`); undefined while up. */
  connectionProblem?(): ConnectionProblem | undefined;
}

/** The webhook deliveries not yet made: the delivery list and retry-now (operations/webhook-operations.ts). */
export interface WebhookQueueStore {
  /** Redis only (store/redis/redis-webhook-queue.ts): webhooks need Redis, where their state is kept. */
  readonly webhooks?: WebhookQueue;
}

/**
 * A whole store (memory or Redis): every view. Built only by the assembly (create-keygate.ts, `keygate keys`);
 * a consumer takes the view it uses.
 */
export interface Store
  extends
    KeyRecordStore,
    AdmissionStore,
    IpBudgetStore,
    OwnerStore,
    OutcomeStore,
    CreditStore,
    HealthStore,
    WebhookQueueStore {
  readonly kind: 'memory' | 'redis';
  close(): Promise<void>;
}

/**
 * How long a deleted key's owner is kept: the longest a nonce can live, 2 × the largest recv_window a
 * policy may allow (maxRecvWindowSeconds ≤ 3600) + the 5 s margin (check-time.ts).
 */
export const DELETED_OWNER_KEPT_MS = 2 * 3_600_000 + 5_000;
