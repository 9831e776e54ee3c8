import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readDataFile } from '../files/read-data-file.js';
import { withSchemaProblems } from '../files/schema.js';

/** One line of KEYGATE_MANAGEMENT_TOKENS_FILE: who, the SHA-256 of the token, and what it may do. */
export interface ManagementToken {
  readonly name: string;
  readonly sha256: Buffer;
  readonly access: 'read' | 'write';
}

export class ManagementTokensError extends Error {
  override readonly name = 'ManagementTokensError';
  constructor(readonly problems: readonly string[]) {
    super(`invalid management tokens file:\n  - ${problems.join('\n  - ')}`);
  }
}

const NAME = /^[A-Za-z0-9_.@-]{1,64}$/;
const HEX = /^[0-9a-f]{64}$/;

export const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');

/** Reads and checks the tokens file (JSON or YAML, config/schema/management-tokens.schema.json); lists every problem at once. */
export function loadManagementTokens(file: string): ManagementToken[] {
  let data: unknown;
  try {
    data = readDataFile(file);
  } catch (err) {
    throw new ManagementTokensError([`${file}: ${(err as Error).message}`]);
  }
  const found: string[] = [];
  const out: ManagementToken[] = [];
  const list = (data as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(list)) found.push(`${file}: tokens: expected a top-level "tokens" list`);
  else {
    const names = new Set<string>();
    const hashes = new Set<string>();
    list.forEach((entry: unknown, i) => {
      const e = (typeof entry === 'object' && entry !== null ? entry : {}) as Record<string, unknown>;
      const at = `${file}: tokens[${i}]`;
      const before = found.length;
      if (typeof e.name !== 'string' || !NAME.test(e.name))
        found.push(`${at}.name: only A-Z a-z 0-9 _ . @ - allowed, 1 to 64 chars`);
      else if (names.has(e.name)) found.push(`${at}.name: duplicate name ${JSON.stringify(e.name)}`);
      if (typeof e.sha256 !== 'string' || !HEX.test(e.sha256))
        found.push(`${at}.sha256: 64 lower-case hex digits (the SHA-256 of the token)`);
      else if (hashes.has(e.sha256)) found.push(`${at}.sha256: the same token is listed twice`);
      if (e.access !== 'read' && e.access !== 'write') found.push(`${at}.access: must be one of "read", "write"`);
      if (found.length > before) return;
      names.add(e.name as string);
      hashes.add(e.sha256 as string);
      out.push({
        name: e.name as string,
        sha256: Buffer.from(e.sha256 as string, 'hex'),
        access: e.access as ManagementToken['access'],
      });
    });
  }
  const problems = withSchemaProblems('managementTokens', data, file, found);
  if (problems.length > 0) throw new ManagementTokensError(problems);
  return out;
}

/**
 * The token a request presents, if any listed token is it. The presented text
 * is hashed first, so every comparison is over 32 bytes whatever was sent, and
 * every listed token is compared (no early exit): the time taken says nothing
 * about which token, or how much of one, matched.
 */
export function matchToken(tokens: readonly ManagementToken[], presented: string): ManagementToken | undefined {
  const digest = createHash('sha256').update(presented).digest();
  let found: ManagementToken | undefined;
  for (const t of tokens) if (timingSafeEqual(t.sha256, digest) && found === undefined) found = t;
  return found;
}

/** A new token: 32 random bytes (256 bits), base64url, with a prefix that says what it is (secret scanners key on it). */
export function generateManagementToken(): string {
  return `kgm_${randomBytes(32).toString('base64url')}`;
}
