"""Verifies Keygate's X-Keygate-Assertion in a Python upstream: PyJWT's PyJWKClient fetches (and caches)
the keys Keygate publishes (pip install "pyjwt[crypto]", or Debian python3-jwt python3-cryptography).

Usage: python3 examples/verify_assertion.py JWKS_URL AUDIENCE ASSERTION [METHOD TARGET]
  JWKS_URL   Keygate's admin port: http://keygate:9090/.well-known/jwks.json
  AUDIENCE   KEYGATE_ASSERTION_AUDIENCE
  ASSERTION  the X-Keygate-Assertion header of the request
  METHOD TARGET  the request's method and target (path?query), for KEYGATE_ASSERTION_MODE=request
Prints the claims as JSON, or the reason on stderr with exit status 1.
"""
import json
import sys

import jwt

TYP = "keygate-assertion+jwt"


def verify(jwks: jwt.PyJWKClient, audience: str, assertion: str, method=None, target=None) -> dict:
    # The typ first: any other JWT signed by the same keys is not an assertion.
    if jwt.get_unverified_header(assertion).get("typ") != TYP:
        raise jwt.InvalidTokenError(f"typ is not {TYP}")
    key = jwks.get_signing_key_from_jwt(assertion)  # by kid; refetches the set once for an unknown kid
    claims = jwt.decode(
        assertion,
        key.key,
        algorithms=["EdDSA", "ES256"],
        audience=audience,
        issuer="keygate",
        leeway=5,
        options={"require": ["sub", "iat", "exp"]},
    )
    # A request-bound assertion (request mode) counts only for the method and target it was signed for.
    if "htm" in claims or "htu" in claims:
        if (claims.get("htm"), claims.get("htu")) != (method, target):
            raise jwt.InvalidTokenError("signed for another method or target")
    return claims


def main() -> int:
    url, audience, assertion, *request = sys.argv[1:]
    try:
        claims = verify(jwt.PyJWKClient(url), audience, assertion, *request)
    except jwt.PyJWTError as err:
        print(f"refused: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    print(json.dumps(claims, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
