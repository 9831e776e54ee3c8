import { MAX_PATH_BYTES, MAX_PATH_SEGMENTS } from '../policy/routes.js';
import { deny, type Denial } from '../errors.js';

export interface Target {
  readonly ok: true;
  /** The raw path, exactly as it will be sent upstream. */
  readonly path: string;
  /** The raw query including "?", or "". */
  readonly query: string;
}

// Printable ASCII without space, '#', '\' and ';'. Everything else in a path is refused.
const PATH_CHARS = /^\/[A-Za-z0-9\-._~%!$&'()*+,=:@/]*$/;
const QUERY_CHARS = /^[A-Za-z0-9\-._~%!$&'()*+,;=:@/?]*$/;
const PCT = /%([0-9A-Fa-f]{2})/g;
// Percent-escapes we refuse in a path: '/', '\', '.' and control characters, which hide structure,
// and every unreserved character, which has one canonical (unescaped) spelling.
const REFUSED_ESCAPES =
  /^(2[fF]|5[cC]|[01][0-9a-fA-F]|7[fF]|2[eE]|[46][1-9a-fA-F]|[57][0-9aA]|3[0-9]|2[dD]|5[fF]|7[eE])$/;
const METHOD = /^[A-Z]{1,16}$/;

/**
 * The first check on every request target (docs/reference/lifecycle.md): accept only a plain origin-form target whose path
 * means one thing to every server behind us. What we check is what the
 * upstream gets, byte for byte.
 */
export function checkTarget(method: string | undefined, url: string | undefined): Target | Denial {
  if (!method || !METHOD.test(method) || method === 'CONNECT' || method === 'TRACE') return deny('bad_target');
  if (!url || url.length > 8192 || url.charCodeAt(0) !== 47 /* / */) return deny('bad_target');
  const q = url.indexOf('?');
  const path = q === -1 ? url : url.slice(0, q);
  const query = q === -1 ? '' : url.slice(q);
  if (path.length > MAX_PATH_BYTES) return deny('path_too_long');
  let slashes = 0;
  for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) {
    if (++slashes > MAX_PATH_SEGMENTS) return deny('too_many_segments');
  }
  if (!PATH_CHARS.test(path) || !QUERY_CHARS.test(query.slice(1))) return deny('bad_target');
  if (path.includes('//')) return deny('bad_target');
  for (const seg of path.split('/')) {
    if (seg === '.' || seg === '..') return deny('bad_target');
  }
  if (path.includes('%')) {
    // Every '%' must start a valid escape, and no escape may hide structure.
    const stripped = path.replace(PCT, (_m, hex: string) => (REFUSED_ESCAPES.test(hex) ? '\u0000' : ''));
    if (stripped.includes('%') || stripped.includes('\u0000')) return deny('bad_target');
  }
  if (query.includes('%') && query.replace(PCT, '').includes('%')) return deny('bad_target');
  return { ok: true, path, query };
}
