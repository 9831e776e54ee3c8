import type { IncomingHttpHeaders } from 'node:http';
import { randomUUID } from 'node:crypto';

export const KEY_ID_HEADER = 'x-api-key-id';
// `expect` too: Keygate answers 100-continue itself, only once a request is authorised.
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'te', 'trailer', 'upgrade', 'expect'];
// Header names as a lenient server may fold them: "_", "." and other token punctuation read as "-".
// Node lower-cases names, so most are already plain and need no folding.
const PLAIN_NAME = /^[a-z0-9-]*$/;
const folded = (name: string) => (PLAIN_NAME.test(name) ? name : name.replace(/[^a-z0-9]/g, '-'));
const FORWARDING: ReadonlySet<string> = new Set(['forwarded', 'x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'x-real-ip']);
// x-original-url / x-rewrite-url: some frameworks (IIS, Symfony, Zend) route on them instead of the path we authorized.
const ALWAYS_DROPPED: ReadonlySet<string> = new Set([...HOP_BY_HOP, 'authorization', 'x-original-url', 'x-rewrite-url']);
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface HeaderContext {
  /** Key id to inject, or undefined for public (unauthenticated) routes. */
  readonly keyId: string | undefined;
  readonly peerIp: string;
  /** True when the peer is a trusted proxy: its X-Forwarded-* are kept and extended. */
  readonly peerTrusted: boolean;
}

/** The request id: the client's when it is sane, otherwise a fresh UUID. */
export function requestIdOf(headers: IncomingHttpHeaders): string {
  const sent = headers['x-request-id'];
  return typeof sent === 'string' && REQUEST_ID.test(sent) ? sent : randomUUID();
}

/**
 * The last step before forwarding. Removes everything a client could use to
 * claim an identity or to make a hop drop our header, then injects ours:
 *   - hop-by-hop headers and every header named in Connection
 *   - Authorization (the upstream never sees the token)
 *   - X-Original-URL / X-Rewrite-URL (a router that honours them would run another route than the one authorized)
 *   - every X-Api-Key-* header in any case or with "_" (or other punctuation) for "-"
 *   - Forwarded / X-Forwarded-* / X-Real-IP unless the peer is a trusted proxy
 * then sets X-Api-Key-Id, X-Forwarded-For/-Proto/-Host and X-Request-Id.
 */
export function mutateHeaders(headers: IncomingHttpHeaders, ctx: HeaderContext, requestId: string): void {
  const connection = headers.connection;
  if (typeof connection === 'string') {
    for (const name of connection.split(',')) delete headers[name.trim().toLowerCase()];
  }
  // Read before the sweep below removes them: only a trusted proxy's values are extended.
  const priorFor = ctx.peerTrusted ? headers['x-forwarded-for'] : undefined;
  const priorProto = ctx.peerTrusted ? headers['x-forwarded-proto'] : undefined;
  const priorHost = ctx.peerTrusted ? headers['x-forwarded-host'] : undefined;
  // One pass: hop-by-hop and Authorization, every X-Api-Key-* and every forwarding header in any
  // spelling ("_" and other punctuation for "-": some servers fold them). Ours are set afresh below.
  for (const name of Object.keys(headers)) {
    if (ALWAYS_DROPPED.has(name)) {
      delete headers[name];
      continue;
    }
    const canonical = folded(name);
    if (FORWARDING.has(canonical) || ALWAYS_DROPPED.has(canonical) || canonical.startsWith('x-api-key')) delete headers[name];
  }

  if (ctx.keyId !== undefined) headers[KEY_ID_HEADER] = ctx.keyId;
  headers['x-forwarded-for'] = typeof priorFor === 'string' && priorFor.length > 0 ? `${priorFor}, ${ctx.peerIp}` : ctx.peerIp;
  headers['x-forwarded-proto'] = typeof priorProto === 'string' ? priorProto : 'http';
  const host = typeof priorHost === 'string' ? priorHost : headers.host;
  if (host !== undefined) headers['x-forwarded-host'] = host;
  headers['x-request-id'] = requestId;
}
