import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Denial, ErrorCode } from '../errors.js';
import { budgetPrefix } from '../net/ip-prefix.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { RateState } from '../store/rate-limit.js';
import type { IpBudgetStore } from '../store/store.js';
import type { RateInfo } from './authenticate.js';

/**
 * The failed-authentication budget per client IP (policy `failedAuthLimit`), owned by the request path
 * (gateway/request-path.ts), which walks it in two steps:
 *   - `checkIpBudget`: while the budget is empty, every request from the IP (IPv6: its /64) is refused with
 *     429 `ip_blocked` (`blockedMs`), right after the header count is screened, before the target, route,
 *     upstream head or token are looked at;
 *   - `spendIpBudget`: a refusal of authentication with one of SPENDING_CODES, for a request that presented
 *     a credential (a non-empty Authorization header: any web page can make its visitors' browsers send
 *     requests without one, an <img> or a preflight, and those must not get a visitor's IP blocked), spends 1 from the IP's budget
 *     in the store (`IpTurn.spend`), shared by every instance (Redis: one script on the IP's own slot, Redis's
 *     clock). The spend decides the answer: the refusal itself while the budget had room, 429 `ip_blocked`
 *     once it was empty. A body found not to match its token's body_sha256 (after the admit) spends too.
 *
 * The budget bounds answers, not starts. A client can have many requests parsed (pipelined on one
 * connection, or over many) before the first of their spends is made, so the check at the start cannot see
 * them. Each request from an IP takes a turn (`enter`) as its authentication starts; a request whose
 * authentication did not spend (it passed, or was refused for something else: a rate limit, a replay of a
 * valid token) is answered only once every request from that IP that began before it has been decided
 * (`IpTurn.whenDecided`), and then 429 if their spends emptied the budget. A request with no earlier
 * request from its IP still in authentication goes on in the same turn: the path that authenticates makes
 * no extra round trip.
 *
 * The check is local, so an admitted request costs no extra round trip: each instance keeps a
 * blocked-until table, fed by its own spends' replies and by the blocks other instances announce
 * (Redis `ip-blocks` channel, heard by the subscriber that hears key changes). An instance that missed
 * an announcement (its subscriber was reconnecting) learns of the block from the next failure it
 * spends for that IP, whose reply says "empty"; until then a valid token from that IP can pass there.
 * The table is bounded (MAX_BLOCKED): past it, entries that expired are dropped, then the oldest.
 */
export const SPENDING_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([40004, 40106, 40107, 10013]);
export const MAX_BLOCKED = 100_000;

/**
 * Whether a refusal of authentication spends from the IP's budget: one of SPENDING_CODES, for a request
 * that presented a credential (a missing or empty Authorization header spends nothing).
 */
export function spendsIpBudget(denial: Denial): boolean {
  return SPENDING_CODES.has(denial.code) && denial.reason !== 'missing_header';
}

/** 429 ip_blocked: no key was looked at, the IP's budget is what the client is told of. */
export type IpBlocked = Denial & { readonly rate: RateInfo };

/**
 * Where an empty IP budget stands `blockedUs` before its next free unit: nothing left, the next failure
 * fits in `blockedUs`, and the whole burst is back (RateLimit `t`, docs/keys.md) (burst - 1) intervals later.
 */
export function blockedState(limit: CompiledLimit, blockedUs: number): RateState {
  return { remaining: 0, resetUs: blockedUs + (limit.burst - 1) * limit.intervalUs, retryAfterUs: blockedUs };
}

/** One request's place among the requests from its IP in authentication (IpBudget.enter). */
export interface IpTurn {
  /**
   * Spends 1 from the IP's budget under `limit` for this request's refusal, and ends the turn once spent:
   * resolves true when the budget had room (the refusal is the answer), false when it was already empty
   * (the answer is 429 ip_blocked). Never rejects: a spend the store could not make is logged, and the
   * refusal it was for stands (true).
   */
  spend(limit: CompiledLimit): Promise<boolean>;
  /**
   * Calls `then(arg)` (and ends the turn) once every request from the IP that took its turn before this one
   * has been decided: at once, in this same turn of the event loop, when none is still pending.
   */
  whenDecided<T>(then: (arg: T) => void, arg: T): void;
  /** Ends the turn with no answer to wait for (the request failed otherwise). */
  end(): void;
}

export interface IpBudget {
  /** How long `ip` is still blocked on this instance, in ms (0: not blocked). */
  blockedMs(ip: string): number;
  /** The turn of a request from `ip` whose authentication starts now (ended by its spend, whenDecided or end). */
  enter(ip: string): IpTurn;
  /**
   * Spends 1 from `ip`'s budget under `limit` outside any turn (a body that did not match its token, found
   * after the admit): resolves once spent, true when the budget had room; never rejects.
   */
  spend(ip: string, limit: CompiledLimit): Promise<boolean>;
  close(): void;
}

/**
 * A turn in its IP's line: the line is a list in the order the turns were taken, its head the oldest turn
 * not yet decided. A class, so every turn has one shape.
 */
class Turn implements IpTurn {
  next: Turn | undefined = undefined;
  decided = false;
  waiting: ((arg: unknown) => void) | undefined = undefined;
  waitingArg: unknown = undefined;
  constructor(
    readonly key: string,
    private readonly line: Lines,
  ) {}
  spend(limit: CompiledLimit): Promise<boolean> {
    return this.line.spendFor(this, limit);
  }
  whenDecided<T>(then: (arg: T) => void, arg: T): void {
    this.waiting = then as (arg: unknown) => void;
    this.waitingArg = arg;
    this.line.advance(this.key);
  }
  end(): void {
    this.decided = true;
    this.line.advance(this.key);
  }
}

interface Lines {
  spendFor(turn: Turn, limit: CompiledLimit): Promise<boolean>;
  advance(key: string): void;
}

export function createIpBudget(deps: {
  readonly store: IpBudgetStore;
  readonly clock: Clock;
  readonly logger: Logger;
}): IpBudget {
  const blockedUntil = new Map<string, number>(); // budgetPrefix(ip) -> until (ms, this instance's clock)

  function block(key: string, blockedUs: number) {
    const until = deps.clock.nowMs() + Math.ceil(blockedUs / 1_000);
    if (blockedUntil.size >= MAX_BLOCKED && !blockedUntil.has(key)) {
      const now = deps.clock.nowMs();
      for (const [k, u] of blockedUntil) if (u <= now) blockedUntil.delete(k);
      if (blockedUntil.size >= MAX_BLOCKED) blockedUntil.delete(blockedUntil.keys().next().value as string);
    }
    if ((blockedUntil.get(key) ?? 0) < until) blockedUntil.set(key, until);
  }
  const stopListening = deps.store.onIpBlocked?.(block) ?? (() => {});

  function remainingMs(key: string): number {
    const until = blockedUntil.get(key);
    if (until === undefined) return 0;
    const left = until - deps.clock.nowMs();
    if (left > 0) return left;
    blockedUntil.delete(key);
    return 0;
  }

  async function spendKey(key: string, limit: CompiledLimit): Promise<boolean> {
    try {
      const { spent, blockedUs } = await deps.store.spendFailedAuth(key, limit);
      if (blockedUs > 0) block(key, blockedUs);
      return spent;
    } catch (err) {
      // The refusal stands whatever happened to the spend; a store that is down cannot share it anyway.
      deps.logger.warn({ err: (err as Error).message }, 'failed-authentication budget not spent');
      return true;
    }
  }

  /** Per IP (budgetPrefix), the oldest and newest turn not yet decided; no entry: none in authentication. */
  const heads = new Map<string, { head: Turn; tail: Turn }>();
  const lines: Lines = {
    async spendFor(turn, limit) {
      try {
        return await spendKey(turn.key, limit);
      } finally {
        // After the reply has fed the table: a turn waiting behind this one then reads the block.
        turn.end();
      }
    },
    advance(key) {
      const line = heads.get(key);
      if (line === undefined) return;
      let ready: Turn[] | undefined;
      let head: Turn | undefined = line.head;
      while (head !== undefined) {
        if (!head.decided && head.waiting !== undefined) {
          (ready ??= []).push(head);
          head.decided = true;
        }
        if (!head.decided) break;
        head = head.next;
      }
      if (head === undefined) heads.delete(key);
      else line.head = head;
      // Called once the line is consistent: a callback may take a new turn for the same IP.
      if (ready !== undefined)
        for (const turn of ready) {
          const then = turn.waiting as (arg: unknown) => void;
          turn.waiting = undefined;
          then(turn.waitingArg);
        }
    },
  };

  function enter(ip: string): IpTurn {
    const key = budgetPrefix(ip);
    const turn = new Turn(key, lines);
    const line = heads.get(key);
    if (line === undefined) heads.set(key, { head: turn, tail: turn });
    else {
      line.tail.next = turn;
      line.tail = turn;
    }
    return turn;
  }

  return {
    blockedMs: (ip) => remainingMs(budgetPrefix(ip)),
    enter,
    spend: (ip, limit) => spendKey(budgetPrefix(ip), limit),
    close: stopListening,
  };
}
