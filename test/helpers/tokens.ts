export { b64url, claims, HS256, nowNonce, sign, token } from '../../scripts/harness/mint.mjs';
