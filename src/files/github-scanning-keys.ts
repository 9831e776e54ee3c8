// Tested in test/unit/github-scanning.test.ts.
import { createPublicKey } from 'node:crypto';
import { readDataFile } from './read-data-file.js';

/** One of GitHub's secret scanning public keys: the identifier its reports name, and the P-256 key (SPKI PEM). */
export interface GithubScanningKey {
  readonly id: string;
  readonly pem: string;
  readonly current: boolean;
}

export class GithubScanningKeysError extends Error {
  override readonly name = 'GithubScanningKeysError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid GitHub secret scanning keys file:\n  - ${problems.join('\n  - ')}`);
  }
}

/**
 * Reads KEYGATE_GITHUB_SCANNING_KEYS_FILE: GitHub's public-keys answer as it is
 * (`curl https://api.github.com/meta/public_keys/secret_scanning`), i.e.
 * `{"public_keys":[{"key_identifier","key","is_current"}]}`; every problem listed at once.
 * Each key must be an EC P-256 public key: a report is verified with ECDSA P-256 SHA-256 only.
 */
export function loadGithubScanningKeys(file: string): GithubScanningKey[] {
  let data: unknown;
  try {
    data = readDataFile(file);
  } catch (err) {
    throw new GithubScanningKeysError([`${file}: ${(err as Error).message}`]);
  }
  const problems: string[] = [];
  const out: GithubScanningKey[] = [];
  const list = (data as { public_keys?: unknown } | null)?.public_keys;
  if (!Array.isArray(list) || list.length === 0)
    problems.push(`${file}: public_keys: expected a non-empty list, as GitHub's public keys answer has`);
  else {
    const ids = new Set<string>();
    list.forEach((entry: unknown, i) => {
      const at = `${file}: public_keys[${i}]`;
      const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
      const id = e.key_identifier;
      const pem = e.key;
      if (typeof id !== 'string' || !/^[0-9a-f]{16,128}$/i.test(id))
        return void problems.push(`${at}.key_identifier: expected a hex identifier`);
      if (ids.has(id)) return void problems.push(`${at}.key_identifier: ${id} is listed twice`);
      ids.add(id);
      if (typeof pem !== 'string') return void problems.push(`${at}.key: expected a PEM public key`);
      try {
        const key = createPublicKey(pem);
        if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
          return void problems.push(`${at}.key: expected an EC P-256 public key`);
      } catch {
        return void problems.push(`${at}.key: not a PEM public key`);
      }
      out.push({ id, pem, current: e.is_current === true });
    });
  }
  if (problems.length > 0) throw new GithubScanningKeysError(problems);
  return out;
}
