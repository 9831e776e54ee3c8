import { describe, expect, it } from 'vitest';
import { decodeToken } from '../../src/pipeline/decode-token.js';
import { MALFORMED_TOKENS, type TokenKit } from '../helpers/cases/malformed-tokens.js';
import { HS256, sign } from '../helpers/tokens.js';

const OPTS = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };
const NONCE = '1795330124122000000';
const good = { type: 'OpenAPIV2', sub: 'k1', nonce: NONCE };
const tok = (payload: unknown, header: unknown = HS256) => sign(header, payload, 'secret-0123456789abcdef');

describe('decodeToken: structure and claims (all failures are 40106)', () => {
  it('accepts the contract token and parses the nonce as BigInt', () => {
    const r = decodeToken(tok(good), OPTS);
    expect(r).toMatchObject({
      ok: true,
      sub: 'k1',
      nonce: NONCE,
      nonceNs: 1795330124122000000n,
      recvWindowSeconds: 30,
    });
  });
  it('takes recv_window from the token when given as a string', () => {
    expect(decodeToken(tok({ ...good, recv_window: '45' }), OPTS)).toMatchObject({ ok: true, recvWindowSeconds: 45 });
  });

  it('reads the binding claims (issue 43) when they are strings, and refuses any other type as bad_claims', () => {
    const claims = { method: 'GET', path: '/api/v3/x?a=1', body_sha256: 'abc' };
    expect(decodeToken(tok({ ...good, ...claims }), OPTS)).toMatchObject({
      ok: true,
      method: 'GET',
      path: '/api/v3/x?a=1',
      bodySha256: 'abc',
    });
    expect(decodeToken(tok(good), OPTS)).toMatchObject({ method: undefined, path: undefined, bodySha256: undefined });
    for (const bad of [{ method: 1 }, { path: ['/'] }, { body_sha256: null }])
      expect(decodeToken(tok({ ...good, ...bad }), OPTS), JSON.stringify(bad)).toMatchObject({ reason: 'bad_claims' });
  });

  // The table the end-to-end test sends too (test/helpers/cases/malformed-tokens.ts), built with this file's key and nonce.
  const kit: TokenKit = {
    claims: (extra = {}) => ({ ...good, ...extra }),
    sign: (header, payload, alg) => sign(header, payload, 'secret-0123456789abcdef', alg),
    parts: () => tok(good).split('.') as [string, string, string],
  };
  const cases = MALFORMED_TOKENS.map(([name, make, reason]) => [name, reason, make(kit)] as const);
  it.each(cases)('%s → 40106 %s', (_name, reason, token) => {
    expect(decodeToken(token, OPTS)).toEqual({ ok: false, code: 40106, reason });
  });
});
