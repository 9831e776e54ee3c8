import { describe, expect, it } from 'vitest';
import { createListSharing, parseKeyRecord } from '../../src/keys/key-record.js';

const SECRET = 'long-enough-secret-123';

describe('parseKeyRecord', () => {
  it.each<[string, Record<string, unknown>]>([
    ['scopes and allowIps', { scopes: ['b', 'a', 'b'], allowIps: ['10.0.0.0/8'] }],
    ['one scope', { scopes: ['accounts:read'] }],
    ['no lists', {}],
    ['empty lists', { scopes: [], allowIps: [] }],
  ])('gives the same record with shared lists as without (%s)', (_name, fields) => {
    const input = { apiKey: 'k', apiSecret: SECRET, ...fields };
    const plain = parseKeyRecord(input, 'k');
    const shared = parseKeyRecord(input, 'k', false, createListSharing());
    expect(shared).toStrictEqual(plain);
    expect(plain.record?.createdAt).toBe('1970-01-01T00:00:00.000Z');
  });

  it('still reports a bad allowIps entry and a bad scope, with sharing', () => {
    const { record, errors } = parseKeyRecord(
      { apiKey: 'k', apiSecret: SECRET, scopes: ['no spaces'], allowIps: ['nope'] },
      'f: keys[0]',
      false,
      createListSharing(),
    );
    expect(record).toBeUndefined();
    expect(errors).toEqual([
      'f: keys[0].scopes: invalid scope "no spaces"',
      'f: keys[0].allowIps: invalid IP or CIDR "nope"',
    ]);
  });
});

describe('createListSharing', () => {
  it.each<[string, string[], string[], boolean]>([
    ['the same single scope', ['accounts:read'], ['accounts:read'], true],
    ['the same scopes', ['a', 'b'], ['a', 'b'], true],
    ['two empty lists', [], [], true],
    ['other scopes', ['a'], ['b'], false],
    ['the same scopes in another order', ['a', 'b'], ['b', 'a'], false],
    ['one list against the two joined', ['a', 'b'], ['a\u0000b'], false],
  ])('%s: one shared list = %s', (_name, a, b, same) => {
    const share = createListSharing();
    const x = share(a);
    const y = share(b);
    expect(x).toEqual(a);
    expect(y).toEqual(b);
    expect(x === y).toBe(same);
    expect(Object.isFrozen(x) && Object.isFrozen(y)).toBe(true);
  });

  it('copies: a list given to it and changed later does not change the shared one', () => {
    const share = createListSharing();
    const input = ['a', 'b'];
    const shared = share(input);
    input.push('c');
    expect(shared).toEqual(['a', 'b']);
  });

  it('shares nothing between two loads', () => {
    expect(createListSharing()(['a'])).not.toBe(createListSharing()(['a']));
  });
});
