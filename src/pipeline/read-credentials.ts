import { deny, type Denial } from '../errors.js';

export interface Credentials {
  readonly ok: true;
  readonly token: string;
}

/**
 * Finds the one Authorization header in the raw header list. Node keeps only
 * the first of duplicate Authorization headers in `req.headers`, so the raw
 * list is the only place a duplicate can be seen.
 */
export function readCredentials(rawHeaders: readonly string[]): Credentials | Denial {
  let value: string | undefined;
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      count++;
      value = rawHeaders[i + 1];
    }
  }
  if (count > 1) return deny('duplicate_header');
  if (value === undefined || value === '') return deny('missing_header');
  // Exactly "Bearer", one space, then a token without whitespace.
  if (!value.startsWith('Bearer ')) return deny('bad_header_format');
  const token = value.slice(7);
  if (token.length === 0 || /\s/.test(token)) return deny('bad_header_format');
  return { ok: true, token };
}
