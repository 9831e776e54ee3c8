import { describe, expect, it } from 'vitest';
import { budgetPrefix } from '../../src/net/ip-prefix.js';

describe('budgetPrefix', () => {
  it.each<[ip: string, prefix: string]>([
    ['203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::1', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff::9', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:db8:0:0:1::', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['::', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['1:2:3:4:5:6:192.0.2.1', '1:2:3:4::/64'],
    ['not-an-ip', 'not-an-ip'],
  ])('%s is budgeted as %s', (ip, prefix) => {
    expect(budgetPrefix(ip)).toBe(prefix);
  });

  it('two addresses of one /64 share a budget, the next /64 does not', () => {
    expect(budgetPrefix('2001:db8:a:b:ffff:ffff:ffff:ffff')).toBe(budgetPrefix('2001:db8:a:b::'));
    expect(budgetPrefix('2001:db8:a:c::')).not.toBe(budgetPrefix('2001:db8:a:b::'));
  });
});
