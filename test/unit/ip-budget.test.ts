import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { deny, type Reason } from '../../src/errors.js';
import type { Authenticator } from '../../src/pipeline/authenticate.js';
import { createIpBudget } from '../../src/pipeline/ip-budget.js';
import { compileRateLimit, IP_POLICY_NAME } from '../../src/policy/rate-limit-spec.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';

/** An authenticator that answers what it is told to and counts its calls (the checks the budget must skip). */
function scripted() {
  let next: Reason | 'ok' = 'ok';
  let calls = 0;
  const inner: Authenticator = async () => {
    calls++;
    return next === 'ok' ? ({ ok: true } as never) : deny(next);
  };
  return { inner, answer: (r: Reason | 'ok') => (next = r), calls: () => calls };
}

function setup(limit = compileRateLimit({ rate: '3/m' }, IP_POLICY_NAME)) {
  const clock = manualClock(1_700_000_000_000);
  const store = createMemoryStore({}, { clock });
  const auth = scripted();
  const budget = createIpBudget(
    { limit: () => limit },
    { inner: auth.inner, store, clock, logger: pino({ level: 'silent' }) },
  );
  return { clock, auth, budget, run: (ip: string) => budget.authenticate([], { ip }) };
}

describe('createIpBudget', () => {
  it.each<[reason: Reason, spends: boolean]>([
    ['missing_header', true], // 40004
    ['bad_header_format', true], // 40107
    ['bad_signature', true], // 40106
    ['replay', true], // 40106
    ['unknown_key', true], // 10013
    ['revoked', true], // 10013
    ['rate_limited', false], // 10429
    ['scope_denied', false], // 10403
    ['store_unavailable', false], // 50300
  ])('a refusal %s spends from the IP budget: %s', async (reason, spends) => {
    const { auth, run } = setup();
    auth.answer(reason);
    for (let i = 0; i < 3; i++) await run('192.0.2.1');
    auth.answer('ok');
    const after = await run('192.0.2.1');
    expect(after.ok ? 'passed' : after.reason).toBe(spends ? 'ip_blocked' : 'passed');
  });

  it('once empty, refuses before the inner checks run, with Retry-After in the RateLimit state; refills on time', async () => {
    const { auth, run, clock, budget } = setup(); // 3/m: one failure back every 20 s
    auth.answer('bad_signature');
    for (let i = 0; i < 3; i++) expect(await run('192.0.2.1')).toMatchObject({ reason: 'bad_signature' });
    const calls = auth.calls();
    const blocked = await run('192.0.2.1');
    expect(blocked).toMatchObject({ ok: false, code: 10429, reason: 'ip_blocked' });
    expect(blocked).toMatchObject({ rate: { limits: [{ name: 'keygate-ip', burst: 3 }], states: [{ remaining: 0 }] } });
    expect(auth.calls()).toBe(calls); // nothing of authentication ran
    expect(budget.blockedMs('192.0.2.1')).toBe(20_000);
    // Another IP, and another /64, are untouched; the same /64 is the same budget.
    auth.answer('ok');
    expect((await run('192.0.2.2')).ok).toBe(true);
    clock.advance(19_999);
    expect((await run('192.0.2.1')).ok).toBe(false);
    clock.advance(1);
    expect((await run('192.0.2.1')).ok).toBe(true); // one failure's worth is back
  });

  it('spendAfterAdmit (a body found not to match body_sha256) spends 1, resolved once spent; off, nothing', async () => {
    const { budget, run } = setup();
    for (let i = 0; i < 3; i++) await budget.spendAfterAdmit('192.0.2.7');
    expect(budget.blockedMs('192.0.2.7')).toBeGreaterThan(0);
    expect(await run('192.0.2.7')).toMatchObject({ reason: 'ip_blocked' });
    expect(budget.blockedMs('192.0.2.8')).toBe(0);
    const clock = manualClock(1_700_000_000_000);
    const off = createIpBudget(
      { limit: () => undefined },
      { inner: scripted().inner, store: createMemoryStore({}, { clock }), clock, logger: pino({ level: 'silent' }) },
    );
    for (let i = 0; i < 5; i++) await off.spendAfterAdmit('192.0.2.7');
    expect(off.blockedMs('192.0.2.7')).toBe(0);
  });

  it('IPv6 clients are budgeted per /64', async () => {
    const { auth, run } = setup();
    auth.answer('unknown_key');
    for (const host of ['1', '2', '3']) await run(`2001:db8:7:8::${host}`);
    auth.answer('ok');
    expect(await run('2001:db8:7:8:ffff::9')).toMatchObject({ reason: 'ip_blocked' });
    expect((await run('2001:db8:7:9::1')).ok).toBe(true);
  });

  it('off (no failedAuthLimit) or no client IP: the authenticator alone, nothing spent', async () => {
    const clock = manualClock();
    const auth = scripted();
    const budget = createIpBudget(
      { limit: () => undefined },
      { inner: auth.inner, store: createMemoryStore({}, { clock }), clock, logger: pino({ level: 'silent' }) },
    );
    auth.answer('bad_signature');
    for (let i = 0; i < 50; i++) await budget.authenticate([], { ip: '192.0.2.1' });
    expect(auth.calls()).toBe(50);
    const { auth: a2, budget: b2 } = setup();
    a2.answer('bad_signature');
    for (let i = 0; i < 10; i++) await b2.authenticate([], {});
    expect(a2.calls()).toBe(10);
  });
});
