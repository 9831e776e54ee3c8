// Tested in test/unit/keys-actions.test.ts, test/process/asymmetric-keys-cli.test.ts.
import { readFileSync } from 'node:fs';
import type { CredentialInput } from '../../keys/key-changes.js';
import { isKeyAlg } from '../../keys/public-key.js';
import { UsageError } from '../cli-errors.js';
import { str, type Parsed } from '../command-line.js';
import { opt } from './key-context.js';

/** `--alg` and `--public-key` of `keys create` and `keys rotate`: which credential a key gets. */
export const CREDENTIAL_OPTIONS = [
  opt('alg', 'HS256|EdDSA|ES256', 'how tokens are signed (default: HS256, or the key’s alg on rotate)'),
  opt('public-key', 'file', 'the client’s SPKI PEM public key (EdDSA/ES256; from `keygate keys keygen`)'),
];

/**
 * The credential the options ask for. The PEM is read here; whether it is the
 * alg's kind of key is the key record's rule (parseKeyRecord), so the CLI and
 * the API give the same answer.
 */
export function credentialFrom(p: Parsed): CredentialInput {
  const alg = str(p, 'alg');
  if (alg !== undefined && !isKeyAlg(alg)) throw new UsageError(`--alg must be HS256, EdDSA or ES256, got ${alg}`);
  const file = str(p, 'public-key');
  if (alg === 'HS256' && file !== undefined) throw new UsageError('--public-key is for EdDSA and ES256 keys only');
  let publicKey: string | undefined;
  if (file !== undefined) {
    try {
      publicKey = readFileSync(file, 'utf8');
    } catch (err) {
      throw new UsageError(`--public-key ${file}: ${(err as Error).message}`);
    }
  }
  if (alg !== undefined && alg !== 'HS256' && publicKey === undefined)
    throw new UsageError(`--alg ${alg} needs --public-key <file> (Keygate holds only the client's public key)`);
  return { ...(alg !== undefined && { alg }), ...(publicKey !== undefined && { publicKey }) };
}
