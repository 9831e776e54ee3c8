export { b64url, claims, HS256, nowNonce, sign, signWithKey, token } from '../../scripts/harness/mint.mjs';
