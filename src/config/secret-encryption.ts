import { readSecretEnv } from './secret-env.js';

/**
 * The AES-256 keys that seal key secrets at rest in Redis, as bytes: config is
 * plain data, and whoever builds the store turns these into a cipher
 * (`createSecretCipher` in src/keys/secret-cipher.ts).
 */
export interface SecretEncryptionKeys {
  readonly current: Buffer;
  /** Keys that still open what they sealed, until `keygate keys reencrypt` has run. */
  readonly previous: readonly Buffer[];
  /** Serialising the config (a log line, a debug dump) never writes the key bytes. */
  toJSON(): string;
}

const REDACTED = () => '[redacted]';

/** Accepts 32 bytes as 64 hex characters or as base64/base64url; returns problems otherwise. */
export function parseEncryptionKey(raw: string | undefined, name: string, problems: string[]): Buffer | undefined {
  if (raw === undefined || raw === '') return undefined;
  const bytes = /^[0-9a-fA-F]{64}$/.test(raw)
    ? Buffer.from(raw, 'hex')
    : /^[A-Za-z0-9+/_-]{43}=?$/.test(raw)
      ? Buffer.from(raw, 'base64')
      : undefined;
  if (!bytes || bytes.length !== 32) {
    problems.push(`${name}: must be 32 random bytes, as 64 hex characters or base64 (e.g. openssl rand -base64 32)`);
    return undefined;
  }
  return bytes;
}

/**
 * KEYGATE_SECRET_ENCRYPTION_KEY seals secrets at rest in Redis;
 * KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS still opens what an older key sealed
 * (until `keygate keys reencrypt`). Problems are appended to `problems`.
 */
export function loadSecretEncryptionKeys(
  env: Readonly<Record<string, string | undefined>>,
  problems: string[],
): SecretEncryptionKeys | undefined {
  const current = parseEncryptionKey(
    readSecretEnv(env, 'KEYGATE_SECRET_ENCRYPTION_KEY', 'KEYGATE_SECRET_ENCRYPTION_KEY_FILE', problems),
    'KEYGATE_SECRET_ENCRYPTION_KEY',
    problems,
  );
  const previous = parseEncryptionKey(
    readSecretEnv(
      env,
      'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS',
      'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS_FILE',
      problems,
    ),
    'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS',
    problems,
  );
  if (previous && !current)
    problems.push('KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: set only together with KEYGATE_SECRET_ENCRYPTION_KEY');
  if (!current) return undefined;
  return { current, previous: previous ? [previous] : [], toJSON: REDACTED };
}
