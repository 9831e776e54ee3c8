import { describe, expect, it } from 'vitest';
import { sameRecord } from '../../src/keys/same-record.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { makeKey } from '../helpers/make-key.js';

describe('sameRecord: never "same" for records that differ', () => {
  const base = makeKey({
    apiKey: 'k1',
    secret: 'a-secret-of-enough-length-0123',
    createdAt: '2026-01-01T00:00:00.000Z',
    scopes: ['a:read', 'b:write'],
  });
  const cases: ReadonlyArray<[string, (r: KeyRecord) => KeyRecord, boolean]> = [
    ['a copy', (r) => structuredClone(r), true],
    ['a field set to undefined is a field absent', (r) => ({ ...r, label: undefined }), true],
    ['another secret', (r) => ({ ...r, secret: `${r.secret}x` }), false],
    ['scopes in another order', (r) => ({ ...r, scopes: [...r.scopes].reverse() }), false],
    ['one scope fewer', (r) => ({ ...r, scopes: r.scopes.slice(1) }), false],
    ['another state', (r) => ({ ...r, state: 'revoked' }), false],
    ['an extra field', (r) => ({ ...r, extra: 1 }) as KeyRecord, false],
    ['an array where an object was', (r) => ({ ...r, allowIps: {} }) as unknown as KeyRecord, false],
    ['null where a value was', (r) => ({ ...r, secret: null }) as unknown as KeyRecord, false],
  ];
  it.each(cases)('%s', (_name, change, same) => {
    expect(sameRecord(base, change(base))).toBe(same);
    expect(sameRecord(change(base), base)).toBe(same);
  });
});
