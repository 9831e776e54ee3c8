// Tested in test/unit/management-tokens.test.ts (the management listener's settings).
import { loadManagementTokens, ManagementTokensError } from './management-tokens.js';
import type { Env } from './read-env-int.js';
import { GithubScanningKeysError, loadGithubScanningKeys } from '../files/github-scanning-keys.js';

export interface ManagementSettings {
  readonly host: string;
  readonly port: number;
  /** KEYGATE_MANAGEMENT_TOKENS_FILE: checked at start, reloaded when it changes. */
  readonly tokensFile: string;
  /** KEYGATE_GITHUB_SCANNING_KEYS_FILE: serves POST /v1/secret-scanning/github when set (Redis only). */
  readonly githubScanningKeysFile?: string;
}

/**
 * The management API: off unless KEYGATE_MANAGEMENT_PORT is set, and then only with a tokens
 * file that loads (a listener nobody can authenticate to, or anybody could, is refused at start).
 */
export function readManagement(
  env: Env,
  port: number,
  adminPort: number,
  problems: string[],
  /** Whether a Redis store is configured (the secret scanning endpoint needs one). */
  redis = true,
): ManagementSettings | undefined {
  const rawPort = env.KEYGATE_MANAGEMENT_PORT;
  const tokensFile = env.KEYGATE_MANAGEMENT_TOKENS_FILE || undefined;
  const scanningFile = env.KEYGATE_GITHUB_SCANNING_KEYS_FILE || undefined;
  if (scanningFile) {
    if (rawPort === undefined || rawPort === '')
      problems.push(
        'KEYGATE_GITHUB_SCANNING_KEYS_FILE: set, but KEYGATE_MANAGEMENT_PORT is not (the secret scanning endpoint is served on the management port)',
      );
    if (!redis)
      problems.push(
        'KEYGATE_GITHUB_SCANNING_KEYS_FILE: needs Redis (a reported key is revoked in the shared store; with the embedded store the keys file is the source of keys: remove a leaked key there)',
      );
    try {
      loadGithubScanningKeys(scanningFile);
    } catch (err) {
      if (!(err instanceof GithubScanningKeysError)) throw err;
      problems.push(...err.problems.map((p) => `KEYGATE_GITHUB_SCANNING_KEYS_FILE: ${p}`));
    }
  }
  if (rawPort === undefined || rawPort === '') {
    if (tokensFile)
      problems.push(
        'KEYGATE_MANAGEMENT_TOKENS_FILE: set, but KEYGATE_MANAGEMENT_PORT is not (the management API listens only on its own port)',
      );
    return undefined;
  }
  if (!/^\d+$/.test(rawPort) || Number(rawPort) > 65535) {
    problems.push(`KEYGATE_MANAGEMENT_PORT: must be an integer between 0 and 65535, got ${JSON.stringify(rawPort)}`);
    return undefined;
  }
  const mport = Number(rawPort);
  if (mport !== 0 && (mport === port || mport === adminPort))
    problems.push(
      'KEYGATE_MANAGEMENT_PORT: must differ from KEYGATE_PORT and KEYGATE_ADMIN_PORT (a NetworkPolicy admits each port to its own audience)',
    );
  if (!tokensFile) {
    problems.push(
      'KEYGATE_MANAGEMENT_TOKENS_FILE: required with KEYGATE_MANAGEMENT_PORT (the tokens allowed to call the management API)',
    );
    return undefined;
  }
  try {
    loadManagementTokens(tokensFile);
  } catch (err) {
    if (!(err instanceof ManagementTokensError)) throw err;
    problems.push(...err.problems.map((p) => `KEYGATE_MANAGEMENT_TOKENS_FILE: ${p}`));
  }
  // Loopback unless asked: the settings backend usually runs beside Keygate or reaches it through a NetworkPolicy.
  return {
    host: env.KEYGATE_MANAGEMENT_HOST || '127.0.0.1',
    port: mport,
    tokensFile,
    ...(scanningFile && { githubScanningKeysFile: scanningFile }),
  };
}
