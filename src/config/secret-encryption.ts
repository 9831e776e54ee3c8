import { readSecretEnv } from './secret-env.js';
import { createSecretCipher, parseEncryptionKey, type SecretCipher } from '../store/secret-cipher.js';

/**
 * KEYGATE_SECRET_ENCRYPTION_KEY seals secrets at rest in Redis;
 * KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS still opens what an older key sealed
 * (until `keygate keys reencrypt`). Problems are appended to `problems`.
 */
export function loadSecretCipher(env: Readonly<Record<string, string | undefined>>, problems: string[]): SecretCipher | undefined {
  const current = parseEncryptionKey(readSecretEnv(env, 'KEYGATE_SECRET_ENCRYPTION_KEY', 'KEYGATE_SECRET_ENCRYPTION_KEY_FILE', problems), 'KEYGATE_SECRET_ENCRYPTION_KEY', problems);
  const previous = parseEncryptionKey(
    readSecretEnv(env, 'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS', 'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS_FILE', problems),
    'KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS',
    problems,
  );
  if (previous && !current) problems.push('KEYGATE_SECRET_ENCRYPTION_KEY_PREVIOUS: set only together with KEYGATE_SECRET_ENCRYPTION_KEY');
  if (!current) return undefined;
  return createSecretCipher({ current, previous: previous ? [previous] : [] });
}
