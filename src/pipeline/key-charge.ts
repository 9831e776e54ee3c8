import type { PreparedKey } from '../keys/prepared-key.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { Budget, Charge } from '../store/store.js';

/**
 * A key's budgets as the admit step charges them (src/store/budgets.ts): its own limit first, then
 * its owner's, prepared once and kept with the key, so an admitted request of a limited key builds
 * no Charge, no budgets array and no limits list of its own. The limits that apply can change while
 * the key stays cached (a policy reload changes the defaults, `keygate owners set` an owner's), so
 * the prepared set says which limits it was made from and is made again when they are not the ones
 * that apply now (two identity compares per request).
 */
export interface KeyBudgets {
  readonly keyLimit: CompiledLimit | undefined;
  readonly ownerLimit: CompiledLimit | undefined;
  readonly budgets: readonly Budget[];
  /** `budgets`' limits, in order: the RateLimit headers' list. */
  readonly limits: readonly CompiledLimit[];
  /** One Charge per route cost met so far (a policy has a handful of costs; 1 unless a route says otherwise). */
  readonly charges: Map<number, KeyCharge>;
}

/** A Charge with its budgets' limits in order (the RateLimit headers' list), read back from the answer. */
export interface KeyCharge extends Charge {
  readonly limits: readonly CompiledLimit[];
}

const preparedBudgets = new WeakMap<PreparedKey, KeyBudgets>();

/**
 * What one admit of `key` charges for `cost`, or undefined when no budget applies and the key has no
 * owner (the nonce alone). The Charge returned is shared by every request of the key at that cost:
 * the stores only read it.
 */
export function chargeOf(
  key: PreparedKey,
  keyLimit: CompiledLimit | undefined,
  ownerLimit: CompiledLimit | undefined,
  cost: number,
): KeyCharge | undefined {
  const owner = key.record.owner;
  if (owner === undefined && keyLimit === undefined) return undefined;
  let prepared = preparedBudgets.get(key);
  if (prepared === undefined || prepared.keyLimit !== keyLimit || prepared.ownerLimit !== ownerLimit) {
    const budgets: Budget[] = [];
    if (keyLimit !== undefined) budgets.push({ kind: 'key', limit: keyLimit });
    // A key without an owner has no owner's budget (its limit is never looked up).
    if (owner !== undefined && ownerLimit !== undefined) budgets.push({ kind: 'owner', limit: ownerLimit });
    prepared = { keyLimit, ownerLimit, budgets, limits: budgets.map((b) => b.limit), charges: new Map() };
    preparedBudgets.set(key, prepared);
  }
  let charge = prepared.charges.get(cost);
  if (charge === undefined) {
    charge = Object.freeze({ cost, owner, budgets: prepared.budgets, limits: prepared.limits });
    prepared.charges.set(cost, charge);
  }
  return charge;
}
