import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { deny, type Reason } from '../../src/errors.js';
import { createIpBudget, spendsIpBudget } from '../../src/pipeline/ip-budget.js';
import { compileRateLimit, IP_POLICY_NAME } from '../../src/policy/rate-limit-spec.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { StoreUnavailableError, type IpBudgetStore } from '../../src/store/store.js';

const LIMIT = compileRateLimit({ rate: '3/m' }, IP_POLICY_NAME); // one failure back every 20 s
const silent = pino({ level: 'silent' });

function setup() {
  const clock = manualClock(1_700_000_000_000);
  const store = createMemoryStore({}, { clock });
  return { clock, budget: createIpBudget({ store, clock, logger: silent }) };
}

describe('spendsIpBudget: the refusals of authentication that spend from the IP budget', () => {
  it.each<[reason: Reason, spends: boolean]>([
    ['missing_header', false], // 40004: no credential presented, nothing spent (a web page can make browsers send these)
    ['bad_header_format', true], // 40107
    ['bad_signature', true], // 40106
    ['replay', true], // 40106
    ['unknown_key', true], // 10013
    ['revoked', true], // 10013
    ['rate_limited', false], // 10429
    ['scope_denied', false], // 10403
    ['store_unavailable', false], // 50300
  ])('%s spends: %s', (reason, spends) => {
    expect(spendsIpBudget(deny(reason))).toBe(spends);
  });
});

describe('createIpBudget', () => {
  it('a spend resolves once made; the budget empties after its burst and refills on time', async () => {
    const { clock, budget } = setup();
    for (let i = 0; i < 2; i++) await budget.spend('192.0.2.1', LIMIT);
    expect(budget.blockedMs('192.0.2.1')).toBe(0);
    await budget.spend('192.0.2.1', LIMIT);
    expect(budget.blockedMs('192.0.2.1')).toBe(20_000);
    // Another IP is untouched.
    expect(budget.blockedMs('192.0.2.2')).toBe(0);
    clock.advance(19_999);
    expect(budget.blockedMs('192.0.2.1')).toBe(1);
    clock.advance(1);
    expect(budget.blockedMs('192.0.2.1')).toBe(0); // one failure's worth is back
  });

  it('IPv6 clients are budgeted per /64', async () => {
    const { budget } = setup();
    for (const host of ['1', '2', '3']) await budget.spend(`2001:db8:7:8::${host}`, LIMIT);
    expect(budget.blockedMs('2001:db8:7:8:ffff::9')).toBeGreaterThan(0);
    expect(budget.blockedMs('2001:db8:7:9::1')).toBe(0);
  });

  it('hears the blocks the store announces (another instance spent), and stops at close', () => {
    const clock = manualClock(1_700_000_000_000);
    let announce: ((ipKey: string, blockedUs: number) => void) | undefined;
    const store: IpBudgetStore = {
      spendFailedAuth: () => Promise.resolve({ spent: true, blockedUs: 0 }),
      onIpBlocked: (listener) => {
        announce = listener;
        return () => (announce = undefined);
      },
    };
    const budget = createIpBudget({ store, clock, logger: silent });
    announce?.('192.0.2.9', 5_000_000);
    expect(budget.blockedMs('192.0.2.9')).toBe(5_000);
    budget.close();
    expect(announce).toBeUndefined();
  });

  it('a spend the store cannot make resolves all the same (the refusal stands) and blocks nothing', async () => {
    const clock = manualClock(1_700_000_000_000);
    const store: IpBudgetStore = { spendFailedAuth: () => Promise.reject(new StoreUnavailableError('down')) };
    const budget = createIpBudget({ store, clock, logger: silent });
    await expect(budget.spend('192.0.2.1', LIMIT)).resolves.toBe(true);
    expect(budget.blockedMs('192.0.2.1')).toBe(0);
  });

  it('a spend says whether the budget had room: the last unit is spent, the next failure finds it empty', async () => {
    const { budget } = setup();
    expect(await budget.spend('192.0.2.1', LIMIT)).toBe(true);
    expect(await budget.spend('192.0.2.1', LIMIT)).toBe(true);
    expect(await budget.spend('192.0.2.1', LIMIT)).toBe(true); // the third of 3 empties it
    expect(await budget.spend('192.0.2.1', LIMIT)).toBe(false);
  });
});

describe('IpBudget.enter: a request that did not spend is decided after the requests from its IP that began before it', () => {
  it('with none pending, whenDecided calls back at once, in the same turn of the event loop', () => {
    const { budget } = setup();
    const seen: string[] = [];
    budget.enter('192.0.2.1').whenDecided((v) => seen.push(v), 'a');
    expect(seen).toEqual(['a']);
  });

  it('waits for the spends of earlier turns from the same IP (IPv6: its /64), in order, and reads the block they made', async () => {
    const { budget } = setup();
    const ip = '2001:db8:7:8::1';
    const order: string[] = [];
    const spends = [1, 2, 3, 4].map(() => budget.enter(ip).spend(LIMIT));
    const valid = budget.enter('2001:db8:7:8::2');
    valid.whenDecided(() => order.push(`valid blocked=${budget.blockedMs(ip) > 0}`), undefined);
    // Another IP is not held up by this line.
    budget.enter('192.0.2.7').whenDecided(() => order.push('other ip'), undefined);
    expect(order).toEqual(['other ip']);
    expect(await Promise.all(spends)).toEqual([true, true, true, false]);
    expect(order).toEqual(['other ip', 'valid blocked=true']);
  });

  it('a later turn does not hold up an earlier one; an ended turn (an internal error) releases the line', async () => {
    const { budget } = setup();
    const seen: number[] = [];
    const first = budget.enter('192.0.2.1');
    const second = budget.enter('192.0.2.1');
    const third = budget.enter('192.0.2.1');
    third.whenDecided((n) => seen.push(n), 3);
    second.whenDecided((n) => seen.push(n), 2);
    expect(seen).toEqual([]);
    first.end();
    expect(seen).toEqual([2, 3]);
    // The line is empty again: a new turn goes on at once.
    budget.enter('192.0.2.1').whenDecided((n) => seen.push(n), 4);
    expect(seen).toEqual([2, 3, 4]);
  });

  it('a spend the store cannot make ends its turn all the same', async () => {
    const clock = manualClock(1_700_000_000_000);
    const store: IpBudgetStore = { spendFailedAuth: () => Promise.reject(new StoreUnavailableError('down')) };
    const budget = createIpBudget({ store, clock, logger: silent });
    const seen: string[] = [];
    const spent = budget.enter('192.0.2.1').spend(LIMIT);
    budget.enter('192.0.2.1').whenDecided(() => seen.push('next'), undefined);
    expect(await spent).toBe(true);
    expect(seen).toEqual(['next']);
  });
});
