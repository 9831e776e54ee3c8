import type { Reason } from '../../../src/errors.js';
import { b64url, HS256 } from '../tokens.js';

/** How a layer builds tokens: its key's claims and secret, its clock's nonce. */
export interface TokenKit {
  /** The claims of a good token ({ type, sub, nonce }) with `extra` on top; an `undefined` value drops a claim. */
  claims(extra?: Record<string, unknown>): Record<string, unknown>;
  /** Signs a header and payload (objects as JSON, strings as given) with the key's secret. */
  sign(header: unknown, payload: unknown, alg?: 'sha256' | 'sha384' | 'sha512'): string;
  /** The three segments of a good token. */
  parts(): [header: string, payload: string, signature: string];
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const good = (k: TokenKit, extra?: Record<string, unknown>) => k.sign(HS256, k.claims(extra));
const raw = (h: string, p: string, s: string) => `${h}.${p}.${s}`;

/**
 * Tokens decodeToken refuses (shape, header, claims: every one a 40106), one table for the rule, iterated by
 *   test/unit/decode-token.test.ts    decodeToken(token) → { ok: false, code: 40106, reason }
 *   test/adversarial/tokens.test.ts   sent as a Bearer token to a running Keygate → 401 40106, nothing forwarded
 * Tokens refused later (time window, unknown key, signature, replay) stay in the end-to-end table only.
 */
export const MALFORMED_TOKENS: ReadonlyArray<readonly [name: string, make: (k: TokenKit) => string, reason: Reason]> = [
  // shape
  ['two segments', (k) => k.parts().slice(0, 2).join('.'), 'malformed'],
  ['four segments', (k) => `${good(k)}.x`, 'malformed'],
  ['five segments (JWE shape)', (k) => `${good(k)}.x.y`, 'malformed'],
  ['empty signature', (k) => `${k.parts()[0]}.${k.parts()[1]}.`, 'malformed'],
  [
    'truncated signature (20 characters)',
    (k) => {
      const [h, p, s] = k.parts();
      return raw(h, p, s.slice(0, 20));
    },
    'malformed',
  ],
  [
    'truncated signature (42 characters)',
    (k) => {
      const [h, p, s] = k.parts();
      return raw(h, p, s.slice(0, 42));
    },
    'malformed',
  ],
  ['HS512-length signature', (k) => k.sign(HS256, k.claims(), 'sha512'), 'malformed'],
  [
    'signature with a non-canonical last character (same bytes, other spelling)',
    (k) => {
      const [h, p, s] = k.parts();
      const i = B64.indexOf(s[42]!);
      return raw(h, p, s.slice(0, 42) + B64[(i & ~3) | ((i + 1) & 3)]);
    },
    'malformed',
  ],
  [
    'signature in standard base64 (+/)',
    (k) => {
      const [h, p, s] = k.parts();
      const std = s.replaceAll('-', '+').replaceAll('_', '/');
      return raw(h, p, std === s ? `+${s.slice(1)}` : std); // a signature without - or _ gets a + of its own
    },
    'malformed',
  ],
  [
    'padding "=" on the header',
    (k) => {
      const [h, p, s] = k.parts();
      return raw(`${h}=`, p, s);
    },
    'malformed',
  ],
  [
    'padding "=" on the payload',
    (k) => {
      const [h, p, s] = k.parts();
      return raw(h, `${p}=`, s);
    },
    'malformed',
  ],
  [
    'standard base64 characters in the payload',
    (k) => {
      const [h, p, s] = k.parts();
      return raw(h, `${p}+/`, s);
    },
    'malformed',
  ],
  [
    'empty header segment',
    (k) => {
      const [, p, s] = k.parts();
      return raw('', p, s);
    },
    'malformed',
  ],
  ['only dots', () => '..', 'malformed'],
  ['token over KEYGATE_MAX_TOKEN_BYTES (5000 bytes)', (k) => good(k, { pad: 'x'.repeat(5000) }), 'token_too_large'],
  // header
  ['header JSON null', (k) => raw(b64url('null'), k.parts()[1], k.parts()[2]), 'malformed'],
  ['header not JSON', (k) => raw(b64url('{alg:HS256}'), k.parts()[1], k.parts()[2]), 'malformed'],
  ['header plain text', (k) => raw(b64url('nope'), k.parts()[1], k.parts()[2]), 'malformed'],
  [
    'header not UTF-8',
    (k) => raw(b64url(Buffer.from([0x7b, 0xc3, 0x28, 0x7d])), k.parts()[1], k.parts()[2]),
    'malformed',
  ],
  ['header is a JSON array', (k) => raw(b64url('["HS256"]'), k.parts()[1], k.parts()[2]), 'malformed'],
  [
    'alg none, empty signature',
    (k) => `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${b64url(JSON.stringify(k.claims()))}.`,
    'malformed',
  ],
  ['alg none, HS256 signature', (k) => k.sign({ alg: 'none', typ: 'JWT' }, k.claims()), 'bad_header'],
  ['alg None', (k) => k.sign({ alg: 'None', typ: 'JWT' }, k.claims()), 'bad_header'],
  ['alg NONE', (k) => k.sign({ alg: 'NONE', typ: 'JWT' }, k.claims()), 'bad_header'],
  // 48 and 64 signature bytes fit under the longest signature (EdDSA/ES256, 86 characters): the header decides.
  ['alg HS384 (signed HS384)', (k) => k.sign({ alg: 'HS384', typ: 'JWT' }, k.claims(), 'sha384'), 'bad_header'],
  ['alg HS512 (signed HS512)', (k) => k.sign({ alg: 'HS512', typ: 'JWT' }, k.claims(), 'sha512'), 'bad_header'],
  ['alg HS384 header, HS256 signature', (k) => k.sign({ alg: 'HS384', typ: 'JWT' }, k.claims()), 'bad_header'],
  ['alg HS512 header, HS256 signature', (k) => k.sign({ alg: 'HS512', typ: 'JWT' }, k.claims()), 'bad_header'],
  ['alg RS256', (k) => k.sign({ alg: 'RS256', typ: 'JWT' }, k.claims()), 'bad_header'],
  // ES256 and EdDSA are allowed algs, but their signatures are 64 bytes: a 32-byte one is the wrong shape.
  ['alg ES256, HS256-length signature', (k) => k.sign({ alg: 'ES256', typ: 'JWT' }, k.claims()), 'malformed'],
  ['alg EdDSA, HS256-length signature', (k) => k.sign({ alg: 'EdDSA', typ: 'JWT' }, k.claims()), 'malformed'],
  [
    'alg ES384 (a 64-byte HMAC in its place)',
    (k) => k.sign({ alg: 'ES384', typ: 'JWT' }, k.claims(), 'sha512'),
    'bad_header',
  ],
  ['alg Ed25519 (not the JWS name)', (k) => k.sign({ alg: 'Ed25519', typ: 'JWT' }, k.claims(), 'sha512'), 'bad_header'],
  ['alg hs256', (k) => k.sign({ alg: 'hs256', typ: 'JWT' }, k.claims()), 'bad_header'],
  ['alg as array', (k) => k.sign({ alg: ['HS256'], typ: 'JWT' }, k.claims()), 'bad_header'],
  ['typ missing', (k) => k.sign({ alg: 'HS256' }, k.claims()), 'bad_header'],
  ['typ jwt lower-case', (k) => k.sign({ alg: 'HS256', typ: 'jwt' }, k.claims()), 'bad_header'],
  ['crit header', (k) => k.sign({ ...HS256, crit: ['exp'] }, k.claims()), 'bad_header'],
  ['crit empty list', (k) => k.sign({ ...HS256, crit: [] }, k.claims()), 'bad_header'],
  ['b64 false', (k) => k.sign({ ...HS256, b64: false }, k.claims()), 'bad_header'],
  // payload
  ['payload not JSON', (k) => raw(k.parts()[0], b64url('{"type":'), k.parts()[2]), 'malformed'],
  ['payload not JSON ({bad)', (k) => raw(k.parts()[0], b64url('{bad'), k.parts()[2]), 'malformed'],
  [
    'payload not UTF-8',
    (k) => raw(k.parts()[0], b64url(Buffer.from([0x7b, 0xff, 0xfe, 0x7d])), k.parts()[2]),
    'malformed',
  ],
  ['payload JSON array', (k) => k.sign(HS256, [1, 2]), 'malformed'],
  ['payload JSON string', (k) => k.sign(HS256, 'str'), 'malformed'],
  ['payload JSON number', (k) => k.sign(HS256, 42), 'malformed'],
  ['payload JSON null', (k) => k.sign(HS256, null), 'malformed'],
  // claims
  ['type missing', (k) => good(k, { type: undefined }), 'bad_claims'],
  ['type OpenAPIV1', (k) => good(k, { type: 'OpenAPIV1' }), 'bad_claims'],
  ['type lower-case', (k) => good(k, { type: 'openapiv2' }), 'bad_claims'],
  ['type as number', (k) => good(k, { type: 2 }), 'bad_claims'],
  ['sub missing', (k) => good(k, { sub: undefined }), 'bad_claims'],
  ['sub as number', (k) => good(k, { sub: 1 }), 'bad_claims'],
  ['sub as list', (k) => good(k, { sub: ['good'] }), 'bad_claims'],
  ['sub empty', (k) => good(k, { sub: '' }), 'bad_claims'],
  ['sub 257 characters', (k) => good(k, { sub: 'g'.repeat(257) }), 'bad_claims'],
  ['exp as string', (k) => good(k, { exp: '123' }), 'bad_claims'],
  ['nbf as string', (k) => good(k, { nbf: 'x' }), 'bad_claims'],
  // nonce forms
  ['nonce missing', (k) => good(k, { nonce: undefined }), 'bad_claims'],
  ['nonce as number', (k) => good(k, { nonce: 1795330124122000000 }), 'bad_claims'],
  ['nonce empty', (k) => good(k, { nonce: '' }), 'bad_claims'],
  ['nonce " 1"', (k) => good(k, { nonce: ' 1' }), 'bad_claims'],
  [
    'nonce with leading space before a good value',
    (k) => good(k, { nonce: ` ${String(k.claims().nonce)}` }),
    'bad_claims',
  ],
  ['nonce "1e18"', (k) => good(k, { nonce: '1e18' }), 'bad_claims'],
  ['nonce "-1"', (k) => good(k, { nonce: '-1' }), 'bad_claims'],
  ['nonce "0x1"', (k) => good(k, { nonce: '0x1' }), 'bad_claims'],
  ['nonce 25 digits', (k) => good(k, { nonce: '1'.repeat(25) }), 'bad_claims'],
  ['nonce float', (k) => good(k, { nonce: `${String(k.claims().nonce)}.5` }), 'bad_claims'],
  ['nonce "+" prefix', (k) => good(k, { nonce: `+${String(k.claims().nonce)}` }), 'bad_claims'],
  ['nonce with a trailing newline', (k) => good(k, { nonce: `${String(k.claims().nonce)}\n` }), 'bad_claims'],
  ['nonce in fullwidth digits', (k) => good(k, { nonce: '１２３' }), 'bad_claims'],
  // recv_window forms
  ['recv_window as number 30', (k) => good(k, { recv_window: 30 }), 'bad_claims'],
  ['recv_window "0"', (k) => good(k, { recv_window: '0' }), 'bad_claims'],
  ['recv_window "-1"', (k) => good(k, { recv_window: '-1' }), 'bad_claims'],
  ['recv_window "3.5"', (k) => good(k, { recv_window: '3.5' }), 'bad_claims'],
  ['recv_window 11 digits', (k) => good(k, { recv_window: '99999999999' }), 'bad_claims'],
  ['recv_window 30 digits', (k) => good(k, { recv_window: '9'.repeat(30) }), 'bad_claims'],
  ['recv_window "05"', (k) => good(k, { recv_window: '05' }), 'bad_claims'],
  ['recv_window "1e1"', (k) => good(k, { recv_window: '1e1' }), 'bad_claims'],
  ['recv_window " 5"', (k) => good(k, { recv_window: ' 5' }), 'bad_claims'],
  ['recv_window above the cap ("61")', (k) => good(k, { recv_window: '61' }), 'recv_window_too_large'],
];
