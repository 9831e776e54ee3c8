import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  checkBinding,
  EMPTY_BODY_SHA256,
  type BindingClaims,
  type BoundRequest,
} from '../../src/pipeline/check-binding.js';

const GET: BoundRequest = { method: 'GET', target: '/api/v3/orders?symbol=BTC', body: 'none' };
const POST: BoundRequest = { method: 'POST', target: '/api/v3/orders', body: 'present' };
const none: BindingClaims = { method: undefined, path: undefined, bodySha256: undefined };
const claims = (c: Partial<BindingClaims>): BindingClaims => ({ ...none, ...c });
const reason = (v: ReturnType<typeof checkBinding>) => (v.ok ? 'pass' : v.reason);

describe('checkBinding', () => {
  it('the empty-body digest is SHA-256 of no bytes, base64url without padding', () => {
    expect(EMPTY_BODY_SHA256).toBe(createHash('sha256').update('').digest('base64url'));
  });

  it('a plain token passes on a key without binding, and is unbound on a required key', () => {
    expect(checkBinding(none, undefined, GET)).toEqual({ ok: true, bodySha256: undefined });
    expect(reason(checkBinding(none, 'off', GET))).toBe('pass');
    expect(reason(checkBinding(none, 'required', GET))).toBe('unbound');
  });

  it('a required key needs method and path, and body_sha256 only when the request has a body', () => {
    const bound = claims({ method: 'GET', path: GET.target });
    expect(reason(checkBinding(bound, 'required', GET))).toBe('pass');
    expect(reason(checkBinding(claims({ method: 'GET' }), 'required', GET))).toBe('unbound');
    expect(reason(checkBinding(claims({ path: GET.target }), 'required', GET))).toBe('unbound');
    const post = claims({ method: 'POST', path: POST.target });
    expect(reason(checkBinding(post, 'required', POST))).toBe('unbound');
    expect(checkBinding({ ...post, bodySha256: 'abc' }, 'required', POST)).toEqual({ ok: true, bodySha256: 'abc' });
  });

  it('a present claim must match on every key: method and path byte for byte, never normalised', () => {
    for (const binding of [undefined, 'required'] as const) {
      expect(reason(checkBinding(claims({ method: 'POST', path: GET.target }), binding, GET))).toBe('binding_mismatch');
      expect(reason(checkBinding(claims({ method: 'get', path: GET.target }), binding, GET))).toBe('binding_mismatch');
      for (const path of [
        '/api/v3/orders?symbol=ETH',
        '/api/v3/orders',
        '/api/v3/Orders?symbol=BTC',
        '/api/v3/orders/?symbol=BTC',
        '/api/v3/%6Frders?symbol=BTC',
        '/api/v3/orders?symbol=%42TC',
      ])
        expect(reason(checkBinding(claims({ method: 'GET', path }), binding, GET)), path).toBe('binding_mismatch');
    }
    // On a key without binding, one claim alone is checked alone.
    expect(reason(checkBinding(claims({ method: 'GET' }), undefined, GET))).toBe('pass');
    expect(reason(checkBinding(claims({ path: '/elsewhere' }), undefined, GET))).toBe('binding_mismatch');
  });

  it('without a body, body_sha256 is known at once: the empty digest passes, any other is a mismatch', () => {
    expect(checkBinding(claims({ bodySha256: EMPTY_BODY_SHA256 }), undefined, GET)).toEqual({
      ok: true,
      bodySha256: undefined,
    });
    expect(reason(checkBinding(claims({ bodySha256: 'x' }), undefined, GET))).toBe('binding_mismatch');
  });

  it('a body Keygate never sees (forward-auth) cannot be bound: body_sha256 is refused there, method and path still bind', () => {
    const unseen: BoundRequest = { ...POST, body: 'unseen' };
    expect(reason(checkBinding(claims({ bodySha256: EMPTY_BODY_SHA256 }), undefined, unseen))).toBe(
      'body_not_bindable',
    );
    expect(reason(checkBinding(claims({ method: 'POST', path: POST.target }), 'required', unseen))).toBe('pass');
    expect(reason(checkBinding(claims({ method: 'PUT', path: POST.target }), 'required', unseen))).toBe(
      'binding_mismatch',
    );
  });
});
