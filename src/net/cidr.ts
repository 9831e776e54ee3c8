import { BlockList, isIP } from 'node:net';

/** IPv4-mapped IPv6 (`::ffff:10.0.0.1`) is the IPv4 address it carries. */
export function normalizeIp(ip: string): string {
  const lower = ip.toLowerCase();
  if (lower.startsWith('::ffff:') && isIP(lower.slice(7)) === 4) return lower.slice(7);
  return lower;
}

/**
 * Parses CIDRs (or bare addresses) into a BlockList, reporting every bad entry.
 * IPv4-mapped IPv6 entries are folded to IPv4 so both spellings of one caller match.
 */
export function parseCidrList(entries: readonly string[], where: string): { list: BlockList; errors: string[] } {
  const list = new BlockList();
  const errors: string[] = [];
  for (const raw of entries) {
    const [addrPart, prefixPart, extra] = raw.trim().split('/');
    const addr = normalizeIp(addrPart ?? '');
    const family = isIP(addr);
    const max = family === 4 ? 32 : 128;
    const mappedShift = family === 4 && (addrPart ?? '').toLowerCase().startsWith('::ffff:') ? 96 : 0;
    const prefix = prefixPart === undefined ? max : Number(prefixPart) - mappedShift;
    if (
      family === 0 ||
      extra !== undefined ||
      !/^\d{1,3}$/.test(prefixPart ?? String(max)) ||
      !(prefix >= 0 && prefix <= max)
    ) {
      errors.push(`${where}: invalid IP or CIDR ${JSON.stringify(raw)}`);
      continue;
    }
    list.addSubnet(addr, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return { list, errors };
}

export function ipAllowed(list: BlockList, ip: string): boolean {
  const addr = normalizeIp(ip);
  const family = isIP(addr);
  if (family === 0) return false;
  return list.check(addr, family === 4 ? 'ipv4' : 'ipv6');
}
