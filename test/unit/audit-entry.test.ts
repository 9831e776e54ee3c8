import { describe, expect, it } from 'vitest';
import {
  AUDIT_CURSOR,
  auditEntry,
  auditMatches,
  auditStreamKey,
  parseAuditEntry,
  type AuditEntry,
} from '../../src/store/audit-entry.js';

const T = Date.parse('2026-03-01T12:00:00.000Z');

describe('auditEntry', () => {
  it('builds the one shape: the key, its owner, and only the extras given', () => {
    expect(
      auditEntry(
        T,
        'ops',
        'revoke',
        { apiKey: 'kg_a', id: 'a', owner: 'acme' },
        { reason: 'leaked', url: 'https://x', source: 'content' },
      ),
    ).toEqual({
      at: '2026-03-01T12:00:00.000Z',
      actor: 'ops',
      action: 'revoke',
      apiKey: 'kg_a',
      id: 'a',
      owner: 'acme',
      reason: 'leaked',
      url: 'https://x',
      source: 'content',
    });
    expect(auditEntry(T, 'ops', 'update', { apiKey: 'kg_a', id: 'a' }, { changes: ['scopes', 'expiresAt'] })).toEqual({
      at: '2026-03-01T12:00:00.000Z',
      actor: 'ops',
      action: 'update',
      apiKey: 'kg_a',
      id: 'a',
      changes: ['scopes', 'expiresAt'],
    });
  });
});

describe('parseAuditEntry', () => {
  it('reads what auditEntry wrote back unchanged', () => {
    const e = auditEntry(
      T,
      'ops',
      'rotate',
      { apiKey: 'kg_a', id: 'a', owner: 'o' },
      { reason: 'r', detail: 'grace=1ms' },
    );
    expect(parseAuditEntry(JSON.stringify(e))).toEqual(e);
  });

  it('copies only the known fields: nothing else in the JSON reaches a reader', () => {
    const e = parseAuditEntry(
      JSON.stringify({ at: 'x', actor: 'a', action: 'create', apiKey: 'k', id: 'i', secret: 'kgs_leak', hash: 'h' }),
    );
    expect(e).toEqual({ at: 'x', actor: 'a', action: 'create', apiKey: 'k', id: 'i' });
  });

  it('reads entries of the older shape (owner and reason in detail) into the fields', () => {
    expect(
      parseAuditEntry(
        JSON.stringify({
          at: 'x',
          actor: 'a',
          action: 'create',
          apiKey: 'k',
          id: 'i',
          detail: 'owner=acme; alg=EdDSA',
        }),
      ),
    ).toMatchObject({ owner: 'acme' });
    expect(
      parseAuditEntry(
        JSON.stringify({ at: 'x', actor: 'a', action: 'revoke', apiKey: 'k', id: 'i', detail: 'compromised' }),
      ),
    ).toMatchObject({ reason: 'compromised' });
    expect(
      parseAuditEntry(
        JSON.stringify({ at: 'x', actor: 'a', action: 'update', apiKey: 'k', id: 'i', detail: 'scopes,owner' }),
      ),
    ).toMatchObject({ changes: ['scopes', 'owner'] });
  });

  it('refuses what is not an entry', () => {
    for (const raw of ['', '{', '[]', 'null', '1', '{"at":"x","actor":"a"}', '{"at":1,"actor":"a","action":"b"}'])
      expect(parseAuditEntry(raw)).toBeUndefined();
  });
});

describe('auditMatches', () => {
  const e: AuditEntry = {
    at: '2026-03-01T12:00:00.000Z',
    actor: 'a',
    action: 'revoke',
    apiKey: 'k',
    id: 'i',
    owner: 'o',
  };
  it('every given field must match', () => {
    expect(auditMatches(e, {})).toBe(true);
    expect(auditMatches(e, { apiKey: 'k', owner: 'o', action: 'revoke', since: T })).toBe(true);
    expect(auditMatches(e, { apiKey: 'x' })).toBe(false);
    expect(auditMatches(e, { owner: 'x' })).toBe(false);
    expect(auditMatches(e, { action: 'create' })).toBe(false);
    expect(auditMatches(e, { since: T + 1 })).toBe(false);
  });
});

it('the stream name carries the keystore hash tag; a cursor is a stream id', () => {
  expect(auditStreamKey('keygate:')).toBe('keygate:{keystore}:audit');
  expect(AUDIT_CURSOR.test('1700000000000-0')).toBe(true);
  expect(AUDIT_CURSOR.test('-')).toBe(false);
  expect(AUDIT_CURSOR.test('1-0 +')).toBe(false);
});
