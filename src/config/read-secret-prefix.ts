// Tested in test/unit/secret-format.test.ts.
import type { Env } from './read-env-int.js';

/** What KEYGATE_SECRET_PREFIX may be: 2–12 characters of a-z0-9, then `_` (a scanner's anchor, never a regex's). */
export const SECRET_PREFIX_RULE = /^[a-z0-9]{2,12}_$/;

/**
 * KEYGATE_SECRET_PREFIX: the prefix of the HS256 secrets this Keygate issues (keys/secret-format.ts);
 * undefined = the default `kgs_`. It only names new secrets: existing ones keep working whatever it is.
 */
export function readSecretPrefix(env: Env, problems: string[]): string | undefined {
  const raw = env.KEYGATE_SECRET_PREFIX;
  if (raw === undefined || raw === '') return undefined;
  if (!SECRET_PREFIX_RULE.test(raw)) {
    problems.push(
      `KEYGATE_SECRET_PREFIX: 2 to 12 characters of a-z and 0-9, then "_" (e.g. "acme_"), got ${JSON.stringify(raw)}`,
    );
    return undefined;
  }
  return raw;
}
