// Tested in test/unit/management-tokens.test.ts (the management listener's settings).
import { loadManagementTokens, ManagementTokensError } from './management-tokens.js';
import type { Env } from './read-env-int.js';
import { GithubScanningKeysError, loadGithubScanningKeys } from '../files/github-scanning-keys.js';

export interface ManagementSettings {
  readonly host: string;
  readonly port: number;
  /** KEYGATE_MANAGEMENT_TOKENS_FILE: checked at start, reloaded when it changes. */
  readonly tokensFile: string;
  /**
   * KEYGATE_GITHUB_SCANNING_KEYS_FILE without KEYGATE_SCANNING_PORT: POST /v1/secret-scanning/github is
   * served on this port too (Redis only).
   */
  readonly githubScanningKeysFile?: string;
}

/** The secret scanning endpoint's own listener (KEYGATE_SCANNING_PORT): that one path and nothing else. */
export interface ScanningSettings {
  readonly host: string;
  readonly port: number;
  /** KEYGATE_GITHUB_SCANNING_KEYS_FILE: GitHub's public keys, reloaded on change and on SIGHUP. */
  readonly keysFile: string;
}

/**
 * KEYGATE_SCANNING_PORT: GitHub's reports on a listener of their own, so a platform publishes that
 * one path (an Ingress rule, a firewall opening) without the management API and console behind it.
 */
export function readScanning(env: Env, taken: readonly number[], problems: string[]): ScanningSettings | undefined {
  const rawPort = env.KEYGATE_SCANNING_PORT;
  if (rawPort === undefined || rawPort === '') return undefined;
  const keysFile = env.KEYGATE_GITHUB_SCANNING_KEYS_FILE || undefined;
  if (!/^\d+$/.test(rawPort) || Number(rawPort) > 65535) {
    problems.push(`KEYGATE_SCANNING_PORT: must be an integer between 0 and 65535, got ${JSON.stringify(rawPort)}`);
    return undefined;
  }
  const port = Number(rawPort);
  if (port !== 0 && taken.includes(port))
    problems.push(
      'KEYGATE_SCANNING_PORT: must differ from KEYGATE_PORT, KEYGATE_ADMIN_PORT and KEYGATE_MANAGEMENT_PORT (it is published to GitHub on its own)',
    );
  if (!keysFile) {
    problems.push(
      'KEYGATE_SCANNING_PORT: set, but KEYGATE_GITHUB_SCANNING_KEYS_FILE is not (the listener serves only GitHub secret scanning reports)',
    );
    return undefined;
  }
  return { host: env.KEYGATE_SCANNING_HOST || '0.0.0.0', port, keysFile };
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
  // With a scanning listener of its own, the management port does not serve the endpoint.
  const ownListener = env.KEYGATE_SCANNING_PORT !== undefined && env.KEYGATE_SCANNING_PORT !== '';
  const onManagement = scanningFile && !ownListener ? scanningFile : undefined;
  if (scanningFile) {
    if (!ownListener && (rawPort === undefined || rawPort === ''))
      problems.push(
        'KEYGATE_GITHUB_SCANNING_KEYS_FILE: set, but neither KEYGATE_SCANNING_PORT nor KEYGATE_MANAGEMENT_PORT is (the secret scanning endpoint needs a listener)',
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
    ...(onManagement && { githubScanningKeysFile: onManagement }),
  };
}
