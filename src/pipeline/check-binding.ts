import { deny, type Denial } from '../errors.js';

/** A key's binding setting: `required` refuses tokens that do not name their request. */
export type Binding = 'off' | 'required';

/** The binding claims of a token (decode-token.ts has checked they are strings). */
export interface BindingClaims {
  readonly method: string | undefined;
  readonly path: string | undefined;
  readonly bodySha256: string | undefined;
}

/**
 * The request as the binding claims are compared with it: the method and the target exactly as in
 * the request line (proxy) or as the asking proxy describes it (forward-auth), and its body: none
 * (no body, or a Content-Length of 0), present (read and hashed later, before anything is forwarded),
 * or unseen (forward-auth: the body never reaches Keygate).
 */
export interface BoundRequest {
  readonly method: string;
  readonly target: string;
  readonly body: 'none' | 'present' | 'unseen';
}

/** Passed; `bodySha256` is the digest the body must have once read (undefined: nothing to read). */
export interface BindingPass {
  readonly ok: true;
  readonly bodySha256: string | undefined;
}

/** base64url (no padding) of SHA-256 of the empty string: what a bodiless request's body_sha256 may say. */
export const EMPTY_BODY_SHA256 = '47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU';

const PASS: BindingPass = Object.freeze({ ok: true, bodySha256: undefined });

/**
 * Whether a token's binding claims fit its request. Pure, and checked once the signature verified
 * (the claims are then the key holder's) and before the nonce is admitted, so a token presented
 * with another method or target is refused without burning its nonce or spending its budget: the
 * holder's own request with it still passes. The body's digest can only be known once the body is
 * read, which Keygate does only for an admitted, authorized request (bound-body.ts).
 *
 * `path` compares byte for byte with the target as sent: path and query, percent-encoding and case
 * as they are. Never normalised, because the upstream's router reads the bytes it is sent, and
 * Keygate forwards exactly those bytes: a comparison after normalising would accept a token signed
 * for one spelling on another that some server reads differently (`%2F` against `/`), and a client
 * can always sign what it sends.
 */
export function checkBinding(
  claims: BindingClaims,
  binding: Binding | undefined,
  request: BoundRequest,
): BindingPass | Denial {
  const { method, path, bodySha256 } = claims;
  // Said rather than ignored: a claim Keygate cannot check must not look checked to the client.
  if (bodySha256 !== undefined && request.body === 'unseen') return deny('body_not_bindable');
  if (
    binding === 'required' &&
    (method === undefined || path === undefined || (request.body === 'present' && bodySha256 === undefined))
  )
    return deny('unbound');
  if (method !== undefined && method !== request.method) return deny('binding_mismatch');
  if (path !== undefined && path !== request.target) return deny('binding_mismatch');
  if (bodySha256 === undefined) return PASS;
  // No body: known now, so refused before the nonce is admitted.
  if (request.body === 'none') return bodySha256 === EMPTY_BODY_SHA256 ? PASS : deny('binding_mismatch');
  return { ok: true, bodySha256 };
}
