import type { PreparedKey } from '../keys/prepared-key.js';
import type { CompiledLimit } from '../policy/rate-limit-spec.js';
import type { Budget, Charge, CreditCharge } from '../store/store.js';
import { compileCredits, KEY_CREDITS_NAME, type CompiledCredits } from '../keys/credits.js';

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
  readonly ownerCredits: CompiledCredits | undefined;
  readonly budgets: readonly Budget[];
  /** The key's credits, then its owner's; undefined when neither has any (no work for credits per request). */
  readonly credits: readonly CreditCharge[] | undefined;
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
  ownerCredits?: CompiledCredits,
): KeyCharge | undefined {
  const owner = key.record.owner;
  if (owner === undefined && keyLimit === undefined && key.record.credits === undefined) return undefined;
  let prepared = preparedBudgets.get(key);
  if (
    prepared === undefined ||
    prepared.keyLimit !== keyLimit ||
    prepared.ownerLimit !== ownerLimit ||
    prepared.ownerCredits !== ownerCredits
  ) {
    const budgets: Budget[] = [];
    if (keyLimit !== undefined) budgets.push({ kind: 'key', limit: keyLimit });
    // A key without an owner has no owner's budget (its limit is never looked up).
    if (owner !== undefined && ownerLimit !== undefined) budgets.push({ kind: 'owner', limit: ownerLimit });
    const credits: CreditCharge[] = [];
    // The key's own credits are compiled again only with its record (a change makes a new PreparedKey).
    const own = prepared?.credits?.[0]?.kind === 'key' ? prepared.credits[0] : undefined;
    if (key.record.credits !== undefined)
      credits.push(own ?? { kind: 'key', spec: compileCredits(key.record.credits, KEY_CREDITS_NAME) });
    if (owner !== undefined && ownerCredits !== undefined) credits.push({ kind: 'owner', spec: ownerCredits });
    prepared = {
      keyLimit,
      ownerLimit,
      ownerCredits,
      budgets,
      credits: credits.length > 0 ? credits : undefined,
      limits: budgets.map((b) => b.limit),
      charges: new Map(),
    };
    preparedBudgets.set(key, prepared);
  }
  let charge = prepared.charges.get(cost);
  if (charge === undefined) {
    charge = Object.freeze({
      cost,
      owner,
      budgets: prepared.budgets,
      limits: prepared.limits,
      ...(prepared.credits && { credits: prepared.credits }),
    });
    prepared.charges.set(cost, charge);
  }
  return charge;
}
