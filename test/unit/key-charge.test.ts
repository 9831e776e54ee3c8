import { describe, expect, it } from 'vitest';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { chargeOf } from '../../src/pipeline/key-charge.js';
import { compileRateLimit } from '../../src/policy/rate-limit-spec.js';
import { makeKey } from '../helpers/make-key.js';

const KEY_LIMIT = compileRateLimit({ rate: '10/s' });
const OWNER_LIMIT = compileRateLimit({ rate: '100/s' }, 'owner');

describe('chargeOf: a key’s budgets prepared once, the route’s cost applied per request', () => {
  it('is nothing for a key with no limit and no owner (the nonce alone)', () => {
    const key = prepareKey(makeKey({ apiKey: 'plain', id: 'k-plain', secret: 's-0123456789abcdef' }));
    expect(chargeOf(key, undefined, undefined, 1)).toBeUndefined();
  });

  it('charges the key’s budget, then its owner’s, at the route’s cost', () => {
    const key = prepareKey(makeKey({ apiKey: 'a', id: 'k-a', secret: 's-0123456789abcdef', owner: 'acme' }));
    expect(chargeOf(key, KEY_LIMIT, OWNER_LIMIT, 5)).toEqual({
      cost: 5,
      owner: 'acme',
      budgets: [
        { kind: 'key', limit: KEY_LIMIT },
        { kind: 'owner', limit: OWNER_LIMIT },
      ],
      limits: [KEY_LIMIT, OWNER_LIMIT],
    });
    // An owned key with no limit at all still names its owner (its state lives there), with no budget.
    expect(chargeOf(key, undefined, undefined, 1)).toEqual({ cost: 1, owner: 'acme', budgets: [], limits: [] });
  });

  it('hands every request of a key at one cost the same Charge, until the limits that apply change', () => {
    const key = prepareKey(makeKey({ apiKey: 'b', id: 'k-b', secret: 's-0123456789abcdef' }));
    const first = chargeOf(key, KEY_LIMIT, undefined, 1);
    expect(chargeOf(key, KEY_LIMIT, undefined, 1)).toBe(first);
    expect(chargeOf(key, KEY_LIMIT, undefined, 3)?.cost).toBe(3);
    expect(chargeOf(key, KEY_LIMIT, undefined, 1)).toBe(first);
    // A policy reload compiled a new default: the next request is charged against it, not the old one.
    const reloaded = compileRateLimit({ rate: '10/s' });
    const after = chargeOf(key, reloaded, undefined, 1);
    expect(after).not.toBe(first);
    expect(after?.budgets[0]?.limit).toBe(reloaded);
    expect(Object.isFrozen(after)).toBe(true);
  });

  it('never charges an owner’s budget to a key without an owner', () => {
    const key = prepareKey(makeKey({ apiKey: 'c', id: 'k-c', secret: 's-0123456789abcdef' }));
    expect(chargeOf(key, KEY_LIMIT, OWNER_LIMIT, 1)?.budgets.map((b) => b.kind)).toEqual(['key']);
  });
});
