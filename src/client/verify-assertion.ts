import {
  createLocalJWKSet,
  createRemoteJWKSet,
  errors,
  jwtVerify,
  type JSONWebKeySet,
  type JWTVerifyGetKey,
} from 'jose';

/**
 * `keygate/verify`: for the upstream. Checks an X-Keygate-Assertion against Keygate's published keys
 * and returns the identity it asserts. Loads nothing of the server (like `keygate/client`); the JWS
 * checks are jose's (a well-kept implementation, with JWKS fetching, caching and a refetch on an
 * unknown kid, which a rotation needs).
 */

/** The assertion's `typ`: anything else, even signed by the same keys, is refused. */
export const ASSERTION_TYP = 'keygate-assertion+jwt';
/** The header Keygate sets. */
export const ASSERTION_HEADER = 'x-keygate-assertion';

export type AssertionErrorCode =
  | 'missing'
  | 'malformed'
  | 'expired'
  | 'wrong_audience'
  | 'wrong_issuer'
  | 'unknown_kid'
  | 'bad_signature'
  | 'wrong_typ'
  | 'wrong_request';

/** Why an assertion was refused: one code per cause, so an upstream can log and count them. */
export class AssertionError extends Error {
  override readonly name = 'AssertionError';
  constructor(
    readonly code: AssertionErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** What the assertion says: the key, its owner and scopes, and in request mode the request it is bound to. */
export interface AssertedIdentity {
  /** The key's id (as X-Api-Key-Id): the `sub` claim. */
  readonly keyId: string;
  readonly owner: string | undefined;
  readonly scopes: readonly string[];
  readonly issuedAt: Date;
  readonly expiresAt: Date;
  /** The signing key's kid. */
  readonly kid: string;
  /** Request mode only: the request id (`jti`), method (`htm`) and target (`htu`) it was signed for. */
  readonly request: { readonly id: string; readonly method: string; readonly target: string } | undefined;
}

export interface VerifierOptions {
  /** The JWK Set URL (Keygate's admin port: /.well-known/jwks.json), or the set itself (`keygate assertion jwks`). */
  readonly jwks: string | URL | JSONWebKeySet;
  /** KEYGATE_ASSERTION_AUDIENCE: this upstream's name. */
  readonly audience: string;
  /** KEYGATE_ASSERTION_ISSUER (default `keygate`). */
  readonly issuer?: string;
  /** Seconds of clock skew allowed between Keygate and the upstream (default 5). */
  readonly clockToleranceSeconds?: number;
}

/** The request the upstream received, to check a request-bound assertion against (its method and target, origin-form). */
export interface ReceivedRequest {
  readonly method: string;
  readonly target: string;
}

export type AssertionVerifier = (
  assertion: string | string[] | undefined,
  received?: ReceivedRequest,
) => Promise<AssertedIdentity>;

/**
 * Returns a function that resolves with the identity of a valid assertion, or rejects with an
 * AssertionError. Give it `received` to check a request-mode assertion's `htm`/`htu` (a
 * request-mode assertion checked without it is refused as `wrong_request`: its binding would go unchecked).
 */
export function createAssertionVerifier(options: VerifierOptions): AssertionVerifier {
  const keys: JWTVerifyGetKey =
    typeof options.jwks === 'string' || options.jwks instanceof URL
      ? createRemoteJWKSet(new URL(options.jwks))
      : createLocalJWKSet(options.jwks);
  const issuer = options.issuer ?? 'keygate';
  const clockTolerance = options.clockToleranceSeconds ?? 5;
  return async (assertion, received) => {
    if (typeof assertion !== 'string' || assertion === '')
      throw new AssertionError('missing', 'no X-Keygate-Assertion (or more than one)');
    let verified: Awaited<ReturnType<typeof jwtVerify>>;
    try {
      verified = await jwtVerify(assertion, keys, {
        audience: options.audience,
        issuer,
        typ: ASSERTION_TYP,
        algorithms: ['EdDSA', 'ES256'],
        clockTolerance,
        requiredClaims: ['sub', 'iat', 'exp'],
      });
    } catch (err) {
      throw asAssertionError(err);
    }
    const { payload, protectedHeader } = verified;
    const scope = typeof payload.scope === 'string' ? payload.scope : '';
    const bound = payload.htm !== undefined || payload.htu !== undefined || payload.jti !== undefined;
    let request: AssertedIdentity['request'];
    if (bound) {
      if (typeof payload.htm !== 'string' || typeof payload.htu !== 'string' || typeof payload.jti !== 'string')
        throw new AssertionError('malformed', 'a request-bound assertion needs jti, htm and htu');
      request = { id: payload.jti, method: payload.htm, target: payload.htu };
      if (received === undefined)
        throw new AssertionError('wrong_request', 'request-bound assertion: pass the received method and target');
      if (received.method !== request.method || received.target !== request.target)
        throw new AssertionError('wrong_request', 'the assertion was signed for another method or target');
    }
    return {
      keyId: payload.sub as string,
      owner: typeof payload.owner === 'string' ? payload.owner : undefined,
      scopes: scope === '' ? [] : scope.split(' '),
      issuedAt: new Date((payload.iat as number) * 1000),
      expiresAt: new Date((payload.exp as number) * 1000),
      kid: protectedHeader.kid ?? '',
      request,
    };
  };
}

function asAssertionError(err: unknown): AssertionError {
  if (err instanceof errors.JWTExpired) return new AssertionError('expired', 'the assertion has expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return new AssertionError('wrong_audience', 'the assertion is for another audience');
    if (err.claim === 'iss') return new AssertionError('wrong_issuer', 'the assertion has another issuer');
    if (err.claim === 'typ') return new AssertionError('wrong_typ', `the assertion's typ is not ${ASSERTION_TYP}`);
    return new AssertionError('malformed', `claim ${err.claim}: ${err.reason}`);
  }
  if (err instanceof errors.JWKSNoMatchingKey)
    return new AssertionError('unknown_kid', 'no published key has the assertion kid');
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JOSEAlgNotAllowed)
    return new AssertionError('bad_signature', 'the signature does not verify');
  return new AssertionError('malformed', 'not a compact JWS assertion');
}
