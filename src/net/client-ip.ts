import type { BlockList } from 'node:net';
import { isIP } from 'node:net';
import { ipAllowed, normalizeIp } from './cidr.js';

/**
 * The caller's address: the socket peer, unless the peer is a trusted proxy,
 * in which case X-Forwarded-For is walked from the right, skipping trusted
 * hops; the first untrusted hop is the caller. Returns undefined when the
 * header is malformed (fail closed: no allow-list will match).
 */
export function clientIp(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: BlockList | null,
): string | undefined {
  if (!peer) return undefined;
  const ip = normalizeIp(peer);
  // No header to walk (the gateway passes none from an untrusted peer): no need to look the peer up.
  if (!trusted || forwardedFor === undefined || !ipAllowed(trusted, ip)) return ip;
  const hops = forwardedFor.split(',').map((h) => normalizeIp(h.trim()));
  let candidate = ip;
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i] as string;
    if (isIP(hop) === 0) return undefined;
    candidate = hop;
    if (!ipAllowed(trusted, hop)) return hop;
  }
  return candidate;
}
