import { createSecretKey, type KeyObject } from 'node:crypto';
import type { BlockList } from 'node:net';
import { parseCidrList } from '../net/cidr.js';
import { MAX_PREVIOUS_SECRETS, type KeyRecord } from './key-record.js';
import { compileRateLimit, type CompiledLimit } from '../policy/rate-limit-spec.js';

/** A secret imported once as a node:crypto KeyObject; previous (rotated) secrets carry their deadline. */
export interface VerifyKey {
  readonly key: KeyObject;
  /** Epoch ms after which this secret no longer verifies (Infinity for the current secret). */
  readonly validUntilMs: number;
}

/** A key made ready for the hot path: secrets imported once, allow-list and scopes compiled. */
export interface PreparedKey {
  readonly record: KeyRecord;
  /** Current secret first, then rotated secrets still in their grace period. */
  readonly verifyKeys: readonly VerifyKey[];
  /** expiresAt as epoch ms (Infinity when the key does not expire). */
  readonly expiresAtMs: number;
  readonly allowList: BlockList | null;
  readonly scopes: ReadonlySet<string>;
  /** The key's own rate limit, compiled; undefined = the policy default applies. */
  readonly rateLimit: CompiledLimit | undefined;
}

/**
 * The secret's UTF-8 bytes, as the contract says (never Base64-decoded). Made
 * into a KeyObject once per secret, so the hot path does not copy the secret
 * into a new HMAC key for every request.
 */
function importSecret(secret: string): KeyObject {
  return createSecretKey(Buffer.from(secret, 'utf8'));
}

/** Built once per cache fill (src/store/key-cache.ts), so the pipeline never parses a record per request. */
export function prepareKey(record: KeyRecord): PreparedKey {
  const verifyKeys: VerifyKey[] = [{ key: importSecret(record.secret), validUntilMs: Infinity }];
  // The newest MAX_PREVIOUS_SECRETS only: what a forged token can cost stays bounded.
  const previous = [...(record.previousSecrets ?? [])]
    .sort((x, y) => Date.parse(y.validUntil) - Date.parse(x.validUntil))
    .slice(0, MAX_PREVIOUS_SECRETS);
  for (const p of previous) {
    verifyKeys.push({ key: importSecret(p.secret), validUntilMs: Date.parse(p.validUntil) });
  }
  return {
    record,
    verifyKeys,
    expiresAtMs: record.expiresAt === undefined ? Infinity : Date.parse(record.expiresAt),
    allowList: record.allowIps.length > 0 ? parseCidrList(record.allowIps, 'allowIps').list : null,
    scopes: new Set(record.scopes),
    rateLimit: record.rateLimit && compileRateLimit(record.rateLimit),
  };
}
