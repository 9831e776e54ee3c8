// Tested in test/e2e/store-contract.test.ts (both stores), test/e2e/owner-limits.test.ts (two instances).
import type { Logger } from 'pino';
import { parseOwnerSettings, ownerSettings, type OwnerRecord } from '../../keys/owner-record.js';
import { compileRateLimit, OWNER_POLICY_NAME, type CompiledLimit } from '../../policy/rate-limit-spec.js';
import { peekBudget } from '../budgets.js';
import type { RateState } from '../rate-limit.js';
import type { AuditEntry } from '../key-write.js';
import type { OwnerHomeRecord } from '../home.js';
import { StoreUnavailableError } from '../store.js';
import type { RedisClient } from './connection/redis-connection.js';

/**
 * Owners' own settings in Redis: one hash, `{prefix}{keystore}:owners` (owner → JSON
 * settings), on the {keystore} slot with the key records and the audit stream, so a change, its
 * audit entry and its change message are one atomic script (as key changes are, key-change-script.ts).
 * The change message goes on the key change channel as `owner:<owner>`: no apiKey holds a colon, so
 * it names no key (a key cache drops nothing), and it rides the change feed's proven subscription.
 *
 * Every instance keeps the owners' compiled limits in a table the request path reads per request
 * (Store.ownerLimit), without a store call: read whole (HGETALL) before the first key is read and on
 * every feed flush (a reconnect: changes may have been missed), and per owner (HGET) on its message. A
 * read that fails is retried until it succeeds; meanwhile the owner (or every owner, for the table) is
 * unknown and its keys are answered 503, never served under a limit that may be stale.
 * Replies on one connection come in the order sent, so a later read always lands after an earlier one.
 * Owners are assumed few beside keys (one account, many keys): the whole table is one HGETALL.
 *
 * KEYS: 1 owners hash · 2 audit stream. ARGV: 1 owner · 2 JSON settings ('' = remove) · 3 change
 * channel · 4 audit entry JSON ('' = none).
 */
export const OWNER_SET_SCRIPT = `
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
if ARGV[4] ~= '' then redis.call('XADD', KEYS[2], 'MAXLEN', '~', '100000', '*', 'entry', ARGV[4]) end
redis.call('PUBLISH', ARGV[3], 'owner:' .. ARGV[1])
return 1
`;

/** The change message of an owner's settings (on the key change channel). */
export const OWNER_MESSAGE_PREFIX = 'owner:';

export interface RedisOwners {
  read(owner: string): Promise<OwnerRecord | null>;
  list(): Promise<OwnerRecord[]>;
  put(record: OwnerRecord, audit: AuditEntry | undefined): Promise<void>;
  /** What is left of the owner's budget now (its GCRA state on Redis's clock), spending nothing. */
  budget(owner: string, limit: CompiledLimit): Promise<RateState>;
  /**
   * The table's limit for `owner` (undefined: none of its own). Throws StoreUnavailableError while this
   * instance's copy of the owner is unknown (its read after a change, or the whole table's, failed and
   * is being retried): its keys are answered 503 rather than with a limit that may be stale.
   */
  limit(owner: string): CompiledLimit | undefined;
  /** Regions: the owner's home and when it moved, from the same table (undefined: none); throws as `limit` does. */
  home(owner: string): OwnerHomeRecord | undefined;
  /** Resolves once the table has been read whole at least once (reads it if not). */
  ensureLoaded(): Promise<void>;
  /** A key change message (null: flush): re-reads the table or the one owner it names. */
  changed(message: string | null): void;
  /** Stops the retries of failed reads (the store is closing). */
  stop(): void;
}

/** A failed read is tried again after this, doubling up to RETRY_MAX_MS, until it succeeds. */
const RETRY_FIRST_MS = 100;
const RETRY_MAX_MS = 2_000;

export function createRedisOwners(
  options: { prefix: string; channel: string },
  deps: {
    /** The request path's connection: the table's reads. */
    client: RedisClient;
    /** The key operations' connection: reads and changes made by operators. */
    manager: RedisClient;
    logger: Logger;
  },
): RedisOwners {
  const hash = `${options.prefix}{keystore}:owners`;
  const audit = `${options.prefix}{keystore}:audit`;
  deps.manager.defineCommand('keygateOwnerSet', { numberOfKeys: 2, lua: OWNER_SET_SCRIPT });
  const setScript = (
    deps.manager as unknown as { keygateOwnerSet(...args: string[]): Promise<unknown> }
  ).keygateOwnerSet.bind(deps.manager);
  let table = new Map<string, CompiledLimit>();
  let homes = new Map<string, OwnerHomeRecord>();
  const homeOf = (r: OwnerRecord | null): OwnerHomeRecord | undefined =>
    r?.home === undefined ? undefined : { home: r.home, movedAtMs: r.homeMovedAtMs ?? 0 };
  let loading: Promise<void> | undefined;
  let loaded = false;
  /** Owners whose change was announced and whose read failed: unknown until a retry succeeds. */
  const unknown = new Map<string, number>(); // owner -> the next retry's delay
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  let tableRetryMs = RETRY_FIRST_MS;
  function later(fn: () => void, ms: number) {
    if (stopped) return;
    const t = setTimeout(() => {
      timers.delete(t);
      fn();
    }, ms);
    t.unref();
    timers.add(t);
  }

  /** A stored record, or null when corrupt (logged; such an owner has no limit of its own, as if unset). */
  function decode(owner: string, raw: string | null | undefined): OwnerRecord | null {
    if (raw === null || raw === undefined) return null;
    const errors: string[] = [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      errors.push('bad JSON');
    }
    const r = errors.length === 0 ? parseOwnerSettings(owner, parsed, 'owner', errors) : undefined;
    if (!r) deps.logger.error({ owner, problems: errors }, 'corrupt owner record in redis; its own limit is ignored');
    return r ?? null;
  }
  const compiled = (r: OwnerRecord | null) => r?.rateLimit && compileRateLimit(r.rateLimit, OWNER_POLICY_NAME);

  function loadAll(): Promise<void> {
    const p = deps.client.hgetall(hash).then((all) => {
      const next = new Map<string, CompiledLimit>();
      const nextHomes = new Map<string, OwnerHomeRecord>();
      for (const [owner, raw] of Object.entries(all)) {
        const record = decode(owner, raw);
        const limit = compiled(record);
        if (limit) next.set(owner, limit);
        const home = homeOf(record);
        if (home) nextHomes.set(owner, home);
      }
      table = next;
      homes = nextHomes;
      loaded = true;
      unknown.clear();
      tableRetryMs = RETRY_FIRST_MS;
    });
    loading = p;
    p.then(
      () => loading === p && (loading = undefined),
      (err: Error) => {
        if (loading === p) loading = undefined;
        deps.logger.warn(
          { err: err.message, retryMs: tableRetryMs },
          "owner limits could not be read; owners' keys are answered 503 until a retry succeeds",
        );
        loaded = false;
        later(() => void (loaded || loading ? undefined : loadAll().catch(() => {})), tableRetryMs);
        tableRetryMs = Math.min(tableRetryMs * 2, RETRY_MAX_MS);
      },
    );
    return p;
  }
  function loadOne(owner: string) {
    deps.client.hget(hash, owner).then(
      (raw) => {
        const record = decode(owner, raw);
        const limit = compiled(record);
        if (limit) table.set(owner, limit);
        else table.delete(owner);
        const home = homeOf(record);
        if (home) homes.set(owner, home);
        else homes.delete(owner);
        unknown.delete(owner);
      },
      (err: Error) => {
        // A change was announced and not read: this instance does not know the owner's limit now.
        const retryMs = unknown.get(owner) ?? RETRY_FIRST_MS;
        if (retryMs === RETRY_FIRST_MS)
          deps.logger.warn(
            { owner, err: err.message },
            "owner's changed limit could not be read; its keys are answered 503 until a retry succeeds",
          );
        unknown.set(owner, Math.min(retryMs * 2, RETRY_MAX_MS));
        later(() => unknown.has(owner) && loadOne(owner), retryMs);
      },
    );
  }

  return {
    async read(owner) {
      return decode(owner, await deps.manager.hget(hash, owner));
    },
    async list() {
      const all = await deps.manager.hgetall(hash);
      return Object.keys(all)
        .sort()
        .map((owner) => decode(owner, all[owner]))
        .filter((r): r is OwnerRecord => r !== null);
    },
    async put(record, entry) {
      const settings = ownerSettings(record);
      const json = Object.keys(settings).every((k) => k === 'updatedAt') ? '' : JSON.stringify(settings);
      await setScript(hash, audit, record.owner, json, options.channel, entry ? JSON.stringify(entry) : '');
    },
    async budget(owner, limit) {
      // The owner's bucket (request-state.ts admitArgs) and Redis's clock, read together on its slot.
      const [s, us, tat] = (await deps.manager.eval(
        "local t = redis.call('TIME') return {t[1], t[2], redis.call('GET', KEYS[1]) or '0'}",
        1,
        `${options.prefix}{owner:${owner}}:tat`,
      )) as [string, string, string];
      return peekBudget(Number(tat), Number(s) * 1_000_000 + Number(us), limit);
    },
    limit(owner) {
      if (!loaded || unknown.has(owner))
        throw new StoreUnavailableError(`the limit of owner ${owner} is being read again after a failed read`);
      return table.get(owner);
    },
    home(owner) {
      if (!loaded || unknown.has(owner))
        throw new StoreUnavailableError(`the home of owner ${owner} is being read again after a failed read`);
      return homes.get(owner);
    },
    ensureLoaded: () => (loaded ? Promise.resolve() : (loading ?? loadAll())),
    changed(message) {
      if (message === null) void loadAll().catch(() => {});
      else if (message.startsWith(OWNER_MESSAGE_PREFIX)) loadOne(message.slice(OWNER_MESSAGE_PREFIX.length));
    },
    stop() {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
    },
  };
}
