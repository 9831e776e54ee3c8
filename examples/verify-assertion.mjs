// Verifies Keygate's X-Keygate-Assertion in a Node upstream with jose: createRemoteJWKSet fetches and
// caches the keys Keygate publishes, and refetches on an unknown kid (a rotation). `keygate/verify`
// wraps the same checks with typed errors.
//
// Usage: node examples/verify-assertion.mjs JWKS_URL AUDIENCE ASSERTION [METHOD TARGET]
//   JWKS_URL   Keygate's admin port: http://keygate:9090/.well-known/jwks.json
//   AUDIENCE   KEYGATE_ASSERTION_AUDIENCE
//   ASSERTION  the X-Keygate-Assertion header of the request
//   METHOD TARGET  the request's method and target (path?query), for KEYGATE_ASSERTION_MODE=request
// Prints the claims as JSON, or the reason on stderr with exit status 1.
import { createRemoteJWKSet, jwtVerify } from 'jose';

const [url, audience, assertion, method, target] = process.argv.slice(2);
const jwks = createRemoteJWKSet(new URL(url)); // one per process: it holds the cache

try {
  const { payload } = await jwtVerify(assertion, jwks, {
    audience,
    issuer: 'keygate',
    typ: 'keygate-assertion+jwt', // any other JWT signed by the same keys is not an assertion
    algorithms: ['EdDSA', 'ES256'],
    clockTolerance: 5,
    requiredClaims: ['sub', 'iat', 'exp'],
  });
  // A request-bound assertion (request mode) counts only for the method and target it was signed for.
  if ((payload.htm !== undefined || payload.htu !== undefined) && (payload.htm !== method || payload.htu !== target))
    throw new Error('signed for another method or target');
  console.log(JSON.stringify(payload));
} catch (err) {
  console.error(`refused: ${err.code ?? err.name}: ${err.message}`);
  process.exit(1);
}
