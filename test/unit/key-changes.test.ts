import { isIssuedSecret } from '../../src/keys/secret-format.js';
import { describe, expect, it } from 'vitest';
import { newKey, parseDuration, revokeKey, rotateKey, updateKey } from '../../src/keys/key-changes.js';
import { keyStatus, MAX_PREVIOUS_SECRETS, publicView } from '../../src/keys/key-record.js';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { makeKey } from '../helpers/make-key.js';

const T0 = Date.parse('2026-11-22T00:00:00Z');

describe('key lifecycle', () => {
  it('creates keys with issued-format secrets (kgs_…, checksum valid; another prefix when given) and optional expiry', () => {
    const { record } = newKey(
      { scopes: ['a'], allowIps: ['10.0.0.0/8'], label: 'x', expiresAt: new Date(T0 + 1000).toISOString() },
      T0,
    );
    expect(record).toBeDefined();
    expect(isIssuedSecret(record!.secret!)).toBe(true);
    expect(isIssuedSecret(newKey({}, T0, 'acme_').record!.secret!, 'acme_')).toBe(true);
    expect(record!.apiKey).not.toBe(record!.id);
    expect(keyStatus(record!, T0)).toBe('active');
    expect(keyStatus(record!, T0 + 1000)).toBe('expired');
  });

  it.each([
    ['acct_42', undefined],
    ['a'.repeat(255), undefined],
    ['org.example-1', undefined],
    ['', 'key.owner: must be a non-empty string'],
    ['a'.repeat(256), 'key.owner: only A-Z a-z 0-9 _ . - allowed, 1 to 255 chars'],
    ['acct 42', 'key.owner: only A-Z a-z 0-9 _ . - allowed, 1 to 255 chars'],
    ['acct\r\nX-Api-Key-Id: forged', 'key.owner: only A-Z a-z 0-9 _ . - allowed, 1 to 255 chars'],
  ])('owner %j: set at creation, kept by every later change', (owner, problem) => {
    const { record, errors } = newKey({ owner, scopes: ['a'] }, T0);
    if (problem) {
      expect([record, errors]).toEqual([undefined, [problem]]);
      return;
    }
    expect(record!.owner).toBe(owner);
    expect(updateKey(record!, { scopes: ['b'], label: 'l' }, T0).record!.owner).toBe(owner);
    expect(rotateKey(record!, 1000, T0).record.owner).toBe(owner);
    expect(revokeKey(record!, 'r', T0).owner).toBe(owner);
    expect(publicView(record!, T0).owner).toBe(owner);
  });

  it('rejects invalid changes with every problem', () => {
    const r = makeKey({ apiKey: 'a' });
    expect(updateKey(r, { scopes: ['bad scope'], allowIps: ['1.2.3.4/40'] }, T0).errors).toHaveLength(2);
  });

  it('updates scopes, allow-list, label and expiry, and can remove the expiry', () => {
    const r = makeKey({ apiKey: 'a', expiresAt: '2030-01-01T00:00:00Z' });
    const { record } = updateKey(r, { scopes: ['x'], allowIps: ['::1'], label: 'new', expiresAt: null }, T0);
    expect(record).toMatchObject({
      scopes: ['x'],
      allowIps: ['::1'],
      label: 'new',
      secret: r.secret,
      updatedAt: new Date(T0).toISOString(),
    });
    expect(record!.expiresAt).toBeUndefined();
  });

  it.each([
    ['sets a limit', undefined, { rateLimit: { rate: '100/s' } }, { rate: '100/s' }],
    ['sets a limit with a burst', undefined, { rateLimit: { rate: '5/m', burst: 20 } }, { rate: '5/m', burst: 20 }],
    ['replaces a limit (its burst too)', { rate: '5/m', burst: 20 }, { rateLimit: { rate: '10/h' } }, { rate: '10/h' }],
    ['changes only the burst', { rate: '5/m', burst: 20 }, { burst: 7 }, { rate: '5/m', burst: 7 }],
    ['removes the limit', { rate: '5/m' }, { rateLimit: null }, undefined],
  ] as const)('rate limit: %s', (_name, before, changes, after) => {
    const r = makeKey({ apiKey: 'a', ...(before && { rateLimit: before }) });
    const { record, errors } = updateKey(r, changes, T0);
    expect(errors).toEqual([]);
    expect(record!.rateLimit).toEqual(after);
  });

  it.each([
    [
      'a bad rate',
      makeKey({ apiKey: 'a' }),
      { rateLimit: { rate: '100/d' } },
      'key.rateLimit.rate: expected <count>/s, /m or /h with a count from 1 to 1000000, got "100/d"',
    ],
    [
      'a burst without any rate',
      makeKey({ apiKey: 'a' }),
      { burst: 3 },
      'key.rateLimit: --burst needs a rate (give --rate-limit, or set one first)',
    ],
    [
      'a zero burst',
      makeKey({ apiKey: 'a' }),
      { rateLimit: { rate: '1/s', burst: 0 } },
      'key.rateLimit.burst: must be an integer from 1 to 1000000',
    ],
  ])('rate limit: refuses %s', (_name, r, changes, problem) => {
    expect(updateKey(r, changes, T0).errors).toEqual([problem]);
  });

  it('creates a key with a rate limit', () => {
    expect(newKey({ rateLimit: { rate: '100/s', burst: 200 } }, T0).record?.rateLimit).toEqual({
      rate: '100/s',
      burst: 200,
    });
  });

  it('revokes with when and why, keeping the record', () => {
    const r = revokeKey(makeKey({ apiKey: 'a' }), 'leaked', T0);
    expect(r).toMatchObject({ state: 'revoked', revokedAt: new Date(T0).toISOString(), revokeReason: 'leaked' });
    expect(publicView(r, T0).status).toBe('revoked');
  });

  it('rotates: the old secret stays valid for the grace period, older expired ones are dropped', () => {
    const r0 = makeKey({ apiKey: 'a' });
    const first = rotateKey(r0, 300_000, T0);
    expect(first.secret).not.toBe(r0.secret);
    expect(first.record.secret).toBe(first.secret);
    expect(first.record.previousSecrets).toEqual([
      { secret: r0.secret, validUntil: new Date(T0 + 300_000).toISOString() },
    ]);
    const second = rotateKey(first.record, 60_000, T0 + 100_000);
    expect(second.record.previousSecrets?.map((p) => p.secret)).toEqual([first.secret, r0.secret]);
    const third = rotateKey(second.record, 0, T0 + 400_000);
    expect(third.record.previousSecrets).toBeUndefined();
  });

  it(`keeps at most ${MAX_PREVIOUS_SECRETS} previous secrets, however often a key is rotated (the newest)`, () => {
    let r = makeKey({ apiKey: 'a' });
    const secrets = [r.secret];
    for (let i = 0; i < 1_000; i++) {
      r = rotateKey(r, 300_000, T0 + i).record;
      secrets.push(r.secret);
    }
    expect(r.previousSecrets?.map((p) => p.secret)).toEqual(secrets.slice(-1 - MAX_PREVIOUS_SECRETS, -1).reverse());
    const many = makeKey({
      apiKey: 'b',
      previousSecrets: Array.from({ length: 10 }, (_, i) => ({
        secret: `previous-secret-number-${i}-0123`,
        validUntil: new Date(T0 + i * 1000).toISOString(),
      })),
    });
    expect(prepareKey(many).verifyKeys).toHaveLength(1 + MAX_PREVIOUS_SECRETS);
  });

  it('never shows secrets in the public view', () => {
    const { record } = rotateKey(makeKey({ apiKey: 'a' }), 1000, T0);
    const text = JSON.stringify(publicView(record, T0));
    expect(text).not.toContain(record.secret);
    expect(text).not.toContain(record.previousSecrets![0]!.secret);
    expect(text).toContain('validUntil');
  });

  it.each([
    ['300s', 300_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['7d', 604_800_000],
    ['1500ms', 1500],
    ['30', 30_000],
    ['0', 0],
  ])('parses duration %s', (raw, ms) => {
    expect(parseDuration(raw)).toBe(ms);
  });
  it.each(['', '5x', '-1s', '1.5m', 'soon'])('refuses duration %j', (raw) => {
    expect(parseDuration(raw)).toBeUndefined();
  });
});
