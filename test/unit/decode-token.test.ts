import { describe, expect, it } from 'vitest';
import { decodeToken } from '../../src/pipeline/decode-token.js';
import { b64url, HS256, sign } from '../helpers/tokens.js';

const OPTS = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };
const NONCE = '1795330124122000000';
const good = { type: 'OpenAPIV2', sub: 'k1', nonce: NONCE };
const tok = (payload: unknown, header: unknown = HS256) => sign(header, payload, 'secret-0123456789abcdef');

describe('decodeToken: structure and claims (all failures are 40106)', () => {
  it('accepts the contract token and parses the nonce as BigInt', () => {
    const r = decodeToken(tok(good), OPTS);
    expect(r).toMatchObject({ ok: true, sub: 'k1', nonce: NONCE, nonceNs: 1795330124122000000n, recvWindowSeconds: 30 });
  });
  it('takes recv_window from the token when given as a string', () => {
    expect(decodeToken(tok({ ...good, recv_window: '45' }), OPTS)).toMatchObject({ ok: true, recvWindowSeconds: 45 });
  });

  const valid = tok(good);
  const [h, p, s] = valid.split('.') as [string, string, string];
  const cases: Array<[string, string, string]> = [
    ['two segments', `${h}.${p}`, 'malformed'],
    ['five segments (JWE shape)', `${h}.${p}.${s}.x.y`, 'malformed'],
    ['four segments', `${h}.${p}.${s}.x`, 'malformed'],
    ['empty signature', `${h}.${p}.`, 'malformed'],
    ['truncated signature', `${h}.${p}.${s.slice(0, 20)}`, 'malformed'],
    ['HS512-length signature', sign(HS256, good, 'secret-0123456789abcdef', 'sha512'), 'malformed'],
    ['padding in segment', `${h}=.${p}.${s}`, 'malformed'],
    ['standard base64 chars', `${h}.${p}+/.${s}`, 'malformed'],
    ['header not JSON', `${b64url('nope')}.${p}.${s}`, 'malformed'],
    ['payload not JSON', `${h}.${b64url('{bad')}.${s}`, 'malformed'],
    ['payload JSON array', tok([1, 2]), 'malformed'],
    ['payload JSON string', tok('str'), 'malformed'],
    ['payload not UTF-8', `${h}.${b64url(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))}.${s}`, 'malformed'],
    ['too large', tok({ ...good, pad: 'x'.repeat(5000) }), 'token_too_large'],
    ['alg none', tok(good, { alg: 'none', typ: 'JWT' }), 'bad_header'],
    ['alg None', tok(good, { alg: 'None', typ: 'JWT' }), 'bad_header'],
    ['alg HS384', tok(good, { alg: 'HS384', typ: 'JWT' }), 'bad_header'],
    ['alg HS512', tok(good, { alg: 'HS512', typ: 'JWT' }), 'bad_header'],
    ['alg RS256', tok(good, { alg: 'RS256', typ: 'JWT' }), 'bad_header'],
    ['alg hs256', tok(good, { alg: 'hs256', typ: 'JWT' }), 'bad_header'],
    ['typ missing', tok(good, { alg: 'HS256' }), 'bad_header'],
    ['typ jwt lower', tok(good, { alg: 'HS256', typ: 'jwt' }), 'bad_header'],
    ['crit header', tok(good, { ...HS256, crit: ['exp'] }), 'bad_header'],
    ['b64 false header', tok(good, { ...HS256, b64: false }), 'bad_header'],
    ['type missing', tok({ sub: 'k1', nonce: NONCE }), 'bad_claims'],
    ['type OpenAPIV1', tok({ ...good, type: 'OpenAPIV1' }), 'bad_claims'],
    ['type lower-case', tok({ ...good, type: 'openapiv2' }), 'bad_claims'],
    ['sub missing', tok({ type: 'OpenAPIV2', nonce: NONCE }), 'bad_claims'],
    ['sub number', tok({ ...good, sub: 12 }), 'bad_claims'],
    ['sub empty', tok({ ...good, sub: '' }), 'bad_claims'],
    ['nonce missing', tok({ type: 'OpenAPIV2', sub: 'k1' }), 'bad_claims'],
    ['nonce number', tok({ ...good, nonce: 1795330124122000000 }), 'bad_claims'],
    ['nonce leading space', tok({ ...good, nonce: ` ${NONCE}` }), 'bad_claims'],
    ['nonce exponent', tok({ ...good, nonce: '1e18' }), 'bad_claims'],
    ['nonce negative', tok({ ...good, nonce: '-1' }), 'bad_claims'],
    ['nonce hex', tok({ ...good, nonce: '0x1' }), 'bad_claims'],
    ['nonce float', tok({ ...good, nonce: `${NONCE}.5` }), 'bad_claims'],
    ['nonce 25 digits', tok({ ...good, nonce: '1'.repeat(25) }), 'bad_claims'],
    ['nonce empty', tok({ ...good, nonce: '' }), 'bad_claims'],
    ['recv_window number', tok({ ...good, recv_window: 30 }), 'bad_claims'],
    ['recv_window zero', tok({ ...good, recv_window: '0' }), 'bad_claims'],
    ['recv_window negative', tok({ ...good, recv_window: '-1' }), 'bad_claims'],
    ['recv_window fraction', tok({ ...good, recv_window: '3.5' }), 'bad_claims'],
    ['recv_window huge', tok({ ...good, recv_window: '99999999999' }), 'bad_claims'],
    ['recv_window above cap', tok({ ...good, recv_window: '61' }), 'recv_window_too_large'],
    ['exp string', tok({ ...good, exp: '123' }), 'bad_claims'],
    ['nbf string', tok({ ...good, nbf: 'x' }), 'bad_claims'],
  ];
  it.each(cases)('%s → 40106 %s', (_name, token, reason) => {
    expect(decodeToken(token, OPTS)).toEqual({ ok: false, code: 40106, reason });
  });
});
