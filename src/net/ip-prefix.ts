import { isIP } from 'node:net';

/**
 * The name a client address is budgeted under (the failed-authentication budget): an
 * IPv4 address as it is; an IPv6 address by its /64, the block one subscriber line or host usually
 * gets (RFC 6177), so a client cannot escape its budget by walking the 2^64 addresses it holds.
 * IPv4-mapped IPv6 arrives here already folded to IPv4 (clientIp / normalizeIp). Anything else
 * (not an address) is returned unchanged.
 */
export function budgetPrefix(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const bare = ip.split('%')[0] as string; // a zone id names an interface, not another client
  const [head = '', tail] = bare.split('::') as [string, string | undefined];
  const groups = (s: string) => (s === '' ? [] : s.split(':'));
  const left = groups(head);
  let right = tail === undefined ? [] : groups(tail);
  // An embedded IPv4 in the last 32 bits is two groups; only the first 64 bits matter here.
  if (right.length > 0 && right[right.length - 1]?.includes('.')) right = [...right.slice(0, -1), '0', '0'];
  else if (tail === undefined && left[left.length - 1]?.includes('.')) left.splice(-1, 1, '0', '0');
  const all =
    tail === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return `${all
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
