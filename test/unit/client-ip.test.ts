import { describe, expect, it } from 'vitest';
import { parseCidrList } from '../../src/net/cidr.js';
import { clientIp } from '../../src/net/client-ip.js';

describe('client IP', () => {
  const trusted = parseCidrList(['10.0.0.0/8'], 't').list;
  const cases: Array<[string, string, string | undefined, string | null, string | undefined]> = [
    ['untrusted peer: X-Forwarded-For ignored', '203.0.113.9', '1.1.1.1', null, '203.0.113.9'],
    ['no proxies configured', '10.0.0.5', '1.1.1.1', null, '10.0.0.5'],
    ['trusted peer: rightmost untrusted hop', '10.0.0.5', '6.6.6.6, 1.1.1.1', 'trusted', '1.1.1.1'],
    ['trusted peer: skips trusted hops', '10.0.0.5', '1.1.1.1, 10.0.0.9', 'trusted', '1.1.1.1'],
    ['trusted peer: all trusted → leftmost', '10.0.0.5', '10.0.0.7, 10.0.0.9', 'trusted', '10.0.0.7'],
    ['trusted peer: malformed hop fails closed', '10.0.0.5', 'nonsense', 'trusted', undefined],
    ['trusted peer without header', '10.0.0.5', undefined, 'trusted', '10.0.0.5'],
    ['IPv4-mapped peer', '::ffff:203.0.113.9', undefined, null, '203.0.113.9'],
  ];
  it.each(cases)('%s', (_n, peer, xff, t, expected) => {
    expect(clientIp(peer, xff, t ? trusted : null)).toBe(expected);
  });
});
