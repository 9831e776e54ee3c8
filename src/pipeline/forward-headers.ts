import { deny, type Denial } from '../errors.js';
import { ASSERTION_HEADER } from '../assertion/assertion-signer.js';
import { newRequestId } from './request-id.js';

export const KEY_ID_HEADER = 'x-api-key-id';
/** The key's owner (the service's account id), beside X-Api-Key-Id, when the key has one. Client copies are dropped with every x-api-key* name. */
export const KEY_OWNER_HEADER = 'x-api-key-owner';
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Never copied from the client. Hop-by-hop headers describe the client's
 * connection; `expect` because Keygate answers 100-continue itself, only once a
 * request is authorised; Authorization because the upstream never sees the
 * token; Content-Length and Transfer-Encoding because Keygate writes the
 * framing itself from what its own parser read; X-Request-Id because Keygate
 * sets it. `x-original-url`/`x-rewrite-url` re-route requests in some frameworks.
 */
const DROPPED: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'te',
  'trailer',
  'upgrade',
  'expect',
  'authorization',
  'content-length',
  'transfer-encoding',
  'x-request-id',
  'x-original-url',
  'x-rewrite-url',
  // Keygate's signed identity: only Keygate may send it, in every mode and on public routes too.
  ASSERTION_HEADER,
]);
/**
 * Names `Connection` may never remove: framing, Host, and every header Keygate
 * sets. A client naming them there is ignored for those tokens, so it can
 * neither strip the framing of a body nor the identity Keygate injects.
 */
const PROTECTED: ReadonlySet<string> = new Set([
  'content-length',
  'transfer-encoding',
  'host',
  KEY_ID_HEADER,
  KEY_OWNER_HEADER,
  ASSERTION_HEADER,
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-request-id',
]);
const PLAIN_NAME = /^[a-z0-9-]*$/;
/**
 * A lower-case header name as a lenient server may fold it: "_", "." and other token punctuation
 * read as "-" (as CGI-style servers do). Shared with check-override.ts, so the headers dropped here
 * and the override headers refused there are recognised under the same spellings.
 */
export function foldedName(name: string): string {
  return PLAIN_NAME.test(name) ? name : name.replace(/[^a-z0-9]/g, '-');
}
const FORWARDING: ReadonlySet<string> = new Set([
  'forwarded',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-real-ip',
]);

/**
 * Whether a header name, as the client spelt it, is never forwarded whatever its Connection header names:
 * DROPPED, the forwarding headers Keygate writes itself, and the x-api-key* identity names, under their
 * folded spellings too ("x_original_url", "content_length": a lenient server reads them as the real
 * names). Decided once per spelling and remembered (a bounded table: clients send the same few names
 * request after request), so a request's headers cost a lookup each, no new lower-case string.
 */
function alwaysDropped(name: string): boolean {
  let dropped = droppedSpellings.get(name);
  if (dropped === undefined) {
    const lower = name.toLowerCase();
    const canonical = foldedName(lower);
    dropped =
      DROPPED.has(lower) || FORWARDING.has(canonical) || DROPPED.has(canonical) || canonical.startsWith('x-api-key');
    if (droppedSpellings.size >= 1024) droppedSpellings.clear();
    droppedSpellings.set(name, dropped);
  }
  return dropped;
}
const droppedSpellings = new Map<string, boolean>();

/** `name` is `lower` (a lower-case name of the same length) in any case, with no new string. */
function sameName(name: string, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const c = name.charCodeAt(i);
    const l = lower.charCodeAt(i);
    if (c !== l && !(c >= 0x41 && c <= 0x5a && (c | 0x20) === l)) return false;
  }
  return true;
}

export interface HeaderContext {
  readonly peerIp: string;
  /** True when the peer is a trusted proxy: its X-Forwarded-For/-Proto/-Host are kept and extended. */
  readonly peerTrusted: boolean;
  readonly requestId: string;
}

/** How the request body reaches the upstream: not at all, with an exact length, or chunked. */
export type BodyFraming = 'none' | 'chunked' | number;

export interface UpstreamHead {
  readonly ok: true;
  /** Flat [name, value, name, value, …] list, in the client's order and spelling, then Keygate's own. */
  readonly headers: string[];
  readonly body: BodyFraming;
}

/** The request id: the client's when it is sane, otherwise a fresh UUID. */
export function requestIdOf(sent: string | string[] | undefined): string {
  return typeof sent === 'string' && REQUEST_ID.test(sent) ? sent : newRequestId();
}

/**
 * The last step before forwarding: builds the upstream's header list from the
 * raw list Node's parser read (never from `req.headers`, which merges and drops
 * repeats). Removes everything a client could use to claim an identity, to make
 * a hop drop our headers, or to re-frame the body; then adds ours:
 * X-Forwarded-For/-Proto/-Host and X-Request-Id. Client copies of X-Keygate-Assertion are dropped
 * (DROPPED, folded spellings too). It runs before
 * authentication (a request it refuses burns no nonce); the gateway appends
 * X-Api-Key-Id (KEY_ID_HEADER), and X-Api-Key-Owner (KEY_OWNER_HEADER) for a
 * key with an owner, and X-Keygate-Assertion when the assertion is on, once the key is known.
 *
 * The framing is derived from what the parser used: Transfer-Encoding (the
 * parser refuses it unless chunked comes last, and refuses it beside
 * Content-Length) means chunked; otherwise Content-Length (the parser refuses
 * duplicates and non-digits) is the exact length; otherwise there is no body.
 * Only a plain `chunked` coding is forwarded: any other coding would reach the
 * upstream undeclared.
 */
export function forwardHeaders(raw: readonly string[], ctx: HeaderContext): UpstreamHead | Denial {
  let connection: string | undefined;
  let body: BodyFraming = 'none';
  let priorFor: string | undefined;
  let priorProto: string | undefined;
  let priorHost: string | undefined;
  let host: string | undefined;
  // First pass: the values that decide what the second pass keeps.
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    switch (name.length) {
      case 4:
        // A repeated Host never gets here (check-headers.ts refuses it first).
        if (host === undefined && sameName(name, 'host')) host = raw[i + 1];
        break;
      case 10:
        if (sameName(name, 'connection'))
          connection = connection === undefined ? raw[i + 1] : `${connection},${raw[i + 1]}`;
        break;
      case 14:
        if (body === 'none' && sameName(name, 'content-length')) body = Number(raw[i + 1]);
        break;
      case 15:
        if (ctx.peerTrusted && sameName(name, 'x-forwarded-for'))
          priorFor = priorFor === undefined ? raw[i + 1] : `${priorFor}, ${raw[i + 1]}`;
        break;
      case 16:
        if (ctx.peerTrusted && priorHost === undefined && sameName(name, 'x-forwarded-host')) priorHost = raw[i + 1];
        break;
      case 17: {
        if (sameName(name, 'transfer-encoding')) {
          if ((raw[i + 1] as string).trim().toLowerCase() !== 'chunked') return deny('bad_framing');
          body = 'chunked';
        } else if (ctx.peerTrusted && priorProto === undefined && sameName(name, 'x-forwarded-proto'))
          priorProto = raw[i + 1];
        break;
      }
    }
  }
  let named: Set<string> | undefined;
  if (connection !== undefined) {
    for (const token of connection.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '' && !PROTECTED.has(name)) (named ??= new Set()).add(name);
    }
  }

  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (alwaysDropped(name) || (named !== undefined && named.has(name.toLowerCase()))) continue;
    out.push(name, raw[i + 1] as string);
  }

  out.push(
    'x-forwarded-for',
    priorFor !== undefined && priorFor.length > 0 ? `${priorFor}, ${ctx.peerIp}` : ctx.peerIp,
  );
  out.push('x-forwarded-proto', priorProto ?? 'http');
  const forwardedHost = priorHost ?? host;
  if (forwardedHost !== undefined) out.push('x-forwarded-host', forwardedHost);
  out.push('x-request-id', ctx.requestId);
  return { ok: true, headers: out, body };
}
