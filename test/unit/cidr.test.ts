import { describe, expect, it } from 'vitest';
import { parseCidrList, ipAllowed } from '../../src/net/cidr.js';

describe('CIDR allow-lists', () => {
  const cases: Array<[string[], string, boolean]> = [
    [['10.0.0.0/8'], '10.1.2.3', true],
    [['10.0.0.0/8'], '11.0.0.1', false],
    [['10.0.0.0/8'], '::ffff:10.1.2.3', true],
    [['::ffff:10.0.0.0/104'], '10.9.9.9', true],
    [['::1'], '::1', true],
    [['::1'], '127.0.0.1', false],
    [['2001:db8::/32'], '2001:db8:1::5', true],
    [['2001:db8::/32'], '2001:db9::1', false],
    [['192.168.1.7'], '192.168.1.7', true],
    [['192.168.1.7'], 'garbage', false],
  ];
  it.each(cases)('%j contains %s: %s', (cidrs, ip, expected) => {
    const { list, errors } = parseCidrList(cidrs, 't');
    expect(errors).toEqual([]);
    expect(ipAllowed(list, ip)).toBe(expected);
  });
  it.each([['10.0.0.0/33'], ['1.2.3'], ['::/129'], ['10.0.0.0/8/8'], ['10.0.0.0/-1'], ['']])('rejects %s', (bad) => {
    expect(parseCidrList([bad], 't').errors).toHaveLength(1);
  });
});
