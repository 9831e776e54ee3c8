import { deny, type Denial } from '../errors.js';

/**
 * The header list as a whole, before any step reads a header: more fields than the limit (431, never
 * half-read), or `Host` more than once (400 ambiguous_header). One rule for every request on the proxy
 * port: the time endpoint, a public route, a forward-auth check and a forwarded request alike, so the
 * answer never depends on which step happened to look. Node keeps only the first `Host` in `req.headers`;
 * the raw list is the only place a repeat shows, and two Hosts are two answers to "which site" that a
 * proxy in front and the upstream may read differently.
 */
export function checkHeaders(raw: readonly string[], maxHeaderCount: number): { readonly ok: true } | Denial {
  if (raw.length > 2 * maxHeaderCount) return deny('too_many_headers');
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return deny('ambiguous_header');
  }
  return SCREENED;
}

const SCREENED = Object.freeze({ ok: true as const });
