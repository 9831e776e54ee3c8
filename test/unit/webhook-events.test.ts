import { describe, expect, it } from 'vitest';
import { AUDIT_ACTIONS, auditEntry } from '../../src/store/audit-entry.js';
import {
  auditEntryOfFields,
  EVENT_OF_ACTION,
  webhookEvent,
  WEBHOOK_EVENT_TYPES,
} from '../../src/store/webhook-events.js';

const key = { apiKey: 'kg_abc', id: 'key_1', owner: 'acct_1' };

describe('webhookEvent: audit entries as events', () => {
  it.each([
    ['create', 'key.created'],
    ['import', 'key.created'],
    ['update', 'key.updated'],
    ['import-replace', 'key.updated'],
    ['end-grace', 'key.updated'],
    ['rotate', 'key.rotated'],
    ['revoke', 'key.revoked'],
    ['delete', 'key.deleted'],
    ['owner-set', 'owner.updated'],
  ] as const)('%s is %s', (action, type) => {
    expect(webhookEvent(auditEntry(0, 'ops', action, key))?.type).toBe(type);
  });

  it('has no event for what changes nothing: a create replay, a reseal, an export', () => {
    for (const action of ['create-replay', 'reencrypt', 'export', 'export-with-secrets'] as const)
      expect(webhookEvent(auditEntry(0, 'ops', action, key))).toBeUndefined();
    expect(
      webhookEvent({ at: '2026-01-01T00:00:00.000Z', actor: 'x', action: 'something-new', apiKey: '', id: '' }),
    ).toBeUndefined();
  });

  it('maps only known audit actions to the six event types', () => {
    for (const action of Object.keys(EVENT_OF_ACTION)) expect(AUDIT_ACTIONS).toContain(action);
    expect(new Set(Object.values(EVENT_OF_ACTION))).toEqual(new Set(WEBHOOK_EVENT_TYPES));
  });

  it('carries the entry: a leak is key.revoked with reason leaked, url and source; the time is the change', () => {
    const entry = auditEntry(Date.parse('2026-03-01T12:00:00Z'), 'github-secret-scanning', 'revoke', key, {
      reason: 'leaked',
      url: 'https://github.com/o/r/blob/x/f',
      source: 'content',
    });
    expect(webhookEvent(entry)).toEqual({
      type: 'key.revoked',
      timestamp: '2026-03-01T12:00:00.000Z',
      data: {
        at: '2026-03-01T12:00:00.000Z',
        actor: 'github-secret-scanning',
        action: 'revoke',
        apiKey: 'kg_abc',
        id: 'key_1',
        owner: 'acct_1',
        reason: 'leaked',
        url: 'https://github.com/o/r/blob/x/f',
        source: 'content',
      },
    });
  });

  it("leaves out an owner entry's empty apiKey and id", () => {
    const e = webhookEvent(
      auditEntry(0, 'ops', 'owner-set', { apiKey: '', id: '', owner: 'acct_9' }, { detail: 'rateLimit=5/h' }),
    );
    expect(e?.data).toEqual({
      at: new Date(0).toISOString(),
      actor: 'ops',
      action: 'owner-set',
      owner: 'acct_9',
      detail: 'rateLimit=5/h',
    });
  });
});

describe('auditEntryOfFields: a stream entry as the store wrote it', () => {
  it('reads the entry field and nothing that is not an entry', () => {
    const entry = auditEntry(0, 'ops', 'create', key);
    expect(auditEntryOfFields(['entry', JSON.stringify(entry)])).toEqual(entry);
    expect(auditEntryOfFields(['other', JSON.stringify(entry)])).toBeUndefined();
    expect(auditEntryOfFields(['entry', '{not json'])).toBeUndefined();
    expect(auditEntryOfFields([])).toBeUndefined();
  });
});
