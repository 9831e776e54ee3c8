import type { Env } from './read-env-int.js';
import { readEnvInt } from './read-env-int.js';

/** How the assertion is bound: to the key's identity (cached per key) or to each request (signed per request). */
export type AssertionMode = 'identity' | 'request';

/** The signed identity assertion (X-Keygate-Assertion), on when KEYGATE_ASSERTION_KEYS_FILE is set. Plain data: the key file is read by keys/. */
export interface AssertionSettings {
  /** A JWK Set (Ed25519 and P-256 keys); its private keys sign, every key's public part is published. */
  readonly keysFile: string;
  readonly audience: string;
  readonly issuer: string;
  readonly ttlSeconds: number;
  readonly mode: AssertionMode;
  /** The kid of the key that signs; undefined = the first key in the file with a private part. */
  readonly signingKid: string | undefined;
}

/** Longest allowed lifetime: an identity assertion can be replayed to the same audience for as long as it lives. */
export const MAX_ASSERTION_TTL_SECONDS = 300;
/** A claim value written into every assertion: printable, no control characters, bounded. */
const CLAIM = /^[\x21-\x7e](?:[\x20-\x7e]{0,254}[\x21-\x7e])?$/;

/** The assertion settings: undefined when the feature is off (no keys file); problems recorded with the others. */
export function readAssertion(env: Env, problems: string[]): AssertionSettings | undefined {
  const keysFile = env.KEYGATE_ASSERTION_KEYS_FILE || undefined;
  const audience = env.KEYGATE_ASSERTION_AUDIENCE || undefined;
  const rawIssuer = env.KEYGATE_ASSERTION_ISSUER || undefined;
  const rawMode = env.KEYGATE_ASSERTION_MODE || undefined;
  const signingKid = env.KEYGATE_ASSERTION_SIGNING_KID || undefined;
  const ttlSeconds = readEnvInt(env, 'KEYGATE_ASSERTION_TTL_SECONDS', 60, 1, MAX_ASSERTION_TTL_SECONDS, problems);
  if (keysFile === undefined) {
    // A setting of a feature that is off would be silently ignored: say so instead.
    const stray = [
      'KEYGATE_ASSERTION_AUDIENCE',
      'KEYGATE_ASSERTION_ISSUER',
      'KEYGATE_ASSERTION_TTL_SECONDS',
      'KEYGATE_ASSERTION_MODE',
      'KEYGATE_ASSERTION_SIGNING_KID',
    ].filter((name) => env[name]);
    if (stray.length > 0)
      problems.push(`${stray.join(', ')}: only used with KEYGATE_ASSERTION_KEYS_FILE (which turns the assertion on)`);
    return undefined;
  }
  if (audience === undefined)
    problems.push('KEYGATE_ASSERTION_AUDIENCE: required with KEYGATE_ASSERTION_KEYS_FILE (the upstream checks it)');
  else if (!CLAIM.test(audience))
    problems.push('KEYGATE_ASSERTION_AUDIENCE: printable ASCII, no leading or trailing space, at most 256 characters');
  const issuer = rawIssuer ?? 'keygate';
  if (!CLAIM.test(issuer))
    problems.push('KEYGATE_ASSERTION_ISSUER: printable ASCII, no leading or trailing space, at most 256 characters');
  if (rawMode !== undefined && rawMode !== 'identity' && rawMode !== 'request')
    problems.push(`KEYGATE_ASSERTION_MODE: "identity" or "request", got ${JSON.stringify(rawMode)}`);
  if (signingKid !== undefined && !CLAIM.test(signingKid))
    problems.push('KEYGATE_ASSERTION_SIGNING_KID: printable ASCII, at most 256 characters');
  return {
    keysFile,
    audience: audience ?? '',
    issuer,
    ttlSeconds,
    mode: rawMode === 'request' ? 'request' : 'identity',
    signingKid,
  };
}
