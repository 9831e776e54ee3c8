import { randomInt } from 'node:crypto';
import { crc32 } from 'node:zlib';

/**
 * The format of the HS256 secrets Keygate issues: `<prefix>` + 40 random base62 characters + 6
 * base62 characters of checksum (zlib's CRC32 of everything before it, prefix included, in base62,
 * left-padded with '0'). The prefix (default `kgs_`) lets a scanner recognise a Keygate secret; the
 * checksum lets it reject look-alikes offline (docs/keys.md: the regular expression and the rule).
 * Secrets of the older format (43 base64url characters), and any a keys file or an import gives,
 * are accepted as they are: the format is for the secrets Keygate makes, never a check on input.
 */
export const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
export const DEFAULT_SECRET_PREFIX = 'kgs_';
/** 40 base62 characters: about 238 bits. */
export const SECRET_RANDOM_CHARS = 40;
/** Enough for 2^32 - 1 in base62 (62^6 > 2^32). */
export const SECRET_CHECKSUM_CHARS = 6;

/** An unsigned 32-bit number in base62, left-padded with '0' to 6 characters. */
export function base62Checksum(n: number): string {
  let out = '';
  let v = n >>> 0;
  while (v > 0) {
    out = BASE62[v % 62] + out;
    v = Math.floor(v / 62);
  }
  return out.padStart(SECRET_CHECKSUM_CHARS, '0');
}

/** The checksum of a secret's body (prefix and random part). */
export const secretChecksum = (body: string): string => base62Checksum(crc32(body));

/** A new secret: prefix, 40 uniformly random base62 characters (randomInt: no modulo bias), checksum. */
export function generateSecret(prefix: string = DEFAULT_SECRET_PREFIX): string {
  let body = prefix;
  for (let i = 0; i < SECRET_RANDOM_CHARS; i++) body += BASE62[randomInt(62)];
  return body + secretChecksum(body);
}

/** Whether `s` has the issued format for `prefix` and its checksum holds (a scanner's offline check). */
export function isIssuedSecret(s: string, prefix: string = DEFAULT_SECRET_PREFIX): boolean {
  if (s.length !== prefix.length + SECRET_RANDOM_CHARS + SECRET_CHECKSUM_CHARS || !s.startsWith(prefix)) return false;
  for (let i = prefix.length; i < s.length; i++) if (!BASE62.includes(s[i] as string)) return false;
  const cut = s.length - SECRET_CHECKSUM_CHARS;
  return secretChecksum(s.slice(0, cut)) === s.slice(cut);
}

/** The regular expression of issued secrets for `prefix` (docs/keys.md, deploy/secret-scanning/). */
export const secretPattern = (prefix: string = DEFAULT_SECRET_PREFIX): string =>
  `${prefix}[0-9A-Za-z]{${SECRET_RANDOM_CHARS}}[0-9A-Za-z]{${SECRET_CHECKSUM_CHARS}}`;
