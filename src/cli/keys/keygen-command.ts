// Tested in test/process/asymmetric-keys-cli.test.ts, test/process/assertion-cli.test.ts.
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { CliError, UsageError } from '../cli-errors.js';
import { str, type Command } from '../command-line.js';

/**
 * `keygate keys keygen`: a key pair for an EdDSA or ES256 key, made where the
 * client will keep it. The private key goes to a new file readable by its
 * owner only (mode 0600, never over an existing file); the public key is
 * printed, for `keys create --public-key` or a tenant's settings page. Needs
 * no Redis: Keygate never sees the private key.
 */
export const keygenCommand: Command = {
  spec: {
    name: 'keygen',
    summary: 'make an EdDSA or ES256 key pair: the private key to a file, the public key printed',
    options: [
      { name: 'alg', type: 'string', value: 'EdDSA|ES256', help: 'Ed25519 (EdDSA, the default) or P-256 (ES256)' },
      { name: 'out', type: 'string', value: 'file', help: 'where to write the private key (PKCS#8 PEM, mode 0600)' },
    ],
    details: `The private key stays with the client: give it to \`keygate token --private-key\`
or to createToken({ apiKey, privateKey }). Register the printed public key with
\`keygate keys create --alg <alg> --public-key <file>\` (or POST /v1/keys).
The file must not exist yet.`,
  },
  run(parsed, io) {
    const alg = str(parsed, 'alg') ?? 'EdDSA';
    if (alg !== 'EdDSA' && alg !== 'ES256') throw new UsageError('--alg must be EdDSA or ES256');
    const out = str(parsed, 'out');
    if (out === undefined) throw new UsageError('--out <file> is required (where the private key goes)');
    const pair =
      alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const publicKey = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const privateKey = pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    try {
      // 'wx': fail if the file exists, so an earlier private key is never overwritten; 0600 from creation on.
      writeFileSync(out, privateKey, { flag: 'wx', mode: 0o600 });
    } catch (err) {
      throw new CliError(`--out ${out}: ${(err as Error).message}`, 1);
    }
    io.out.write(publicKey);
    io.err.write(`Wrote the ${alg} private key to ${out} (mode 0600); the public key is above.\n`);
    return Promise.resolve(0);
  },
};
