import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GithubScanningKeysError, loadGithubScanningKeys } from '../../src/files/github-scanning-keys.js';
import { verifyReport } from '../../src/management/github-scanning.js';

const p256 = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const other = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const p384 = generateKeyPairSync('ec', { namedCurve: 'secp384r1' });
const pem = (k: typeof p256.publicKey) => k.export({ type: 'spki', format: 'pem' }) as string;
const ID = 'ab'.repeat(32);

function file(content: unknown): string {
  const f = join(mkdtempSync(join(tmpdir(), 'kg-gh-')), 'keys.json');
  writeFileSync(f, typeof content === 'string' ? content : JSON.stringify(content));
  return f;
}

describe('loadGithubScanningKeys: GitHub public-keys JSON', () => {
  it('reads the shape GitHub answers', () => {
    const keys = loadGithubScanningKeys(
      file({ public_keys: [{ key_identifier: ID, key: pem(p256.publicKey), is_current: true }] }),
    );
    expect(keys).toEqual([{ id: ID, pem: pem(p256.publicKey), current: true }]);
  });

  it('lists every problem at once: a missing id, a duplicate, a non-P-256 key, not a key', () => {
    const f = file({
      public_keys: [
        { key: pem(p256.publicKey) },
        { key_identifier: ID, key: pem(p256.publicKey) },
        { key_identifier: ID, key: pem(p256.publicKey) },
        { key_identifier: 'cd'.repeat(32), key: pem(p384.publicKey) },
        { key_identifier: 'ef'.repeat(32), key: 'nope' },
      ],
    });
    try {
      loadGithubScanningKeys(f);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(GithubScanningKeysError);
      expect((err as GithubScanningKeysError).problems.map((p) => p.split(': ').slice(1).join(': '))).toEqual([
        'public_keys[0].key_identifier: expected a hex identifier',
        `public_keys[2].key_identifier: ${ID} is listed twice`,
        'public_keys[3].key: expected an EC P-256 public key',
        'public_keys[4].key: not a PEM public key',
      ]);
    }
    expect(() => loadGithubScanningKeys(file({ public_keys: [] }))).toThrow(GithubScanningKeysError);
    expect(() => loadGithubScanningKeys(file('{'))).toThrow(GithubScanningKeysError);
  });
});

describe('verifyReport: ECDSA P-256 SHA-256, base64 DER, by the named key only', () => {
  const keys = [
    { id: ID, pem: pem(p256.publicKey), current: true },
    { id: 'cd'.repeat(32), pem: pem(other.publicKey), current: false },
  ];
  const body = Buffer.from('[{"token":"kgs_x","type":"t","url":"u","source":"content"}]');
  const sig = (key: typeof p256.privateKey, b = body) =>
    sign('sha256', b, { key, dsaEncoding: 'der' }).toString('base64');

  it('accepts the named key signature over the exact bytes', () => {
    expect(verifyReport(keys, ID, sig(p256.privateKey), body)).toBe(true);
    expect(verifyReport(keys, 'cd'.repeat(32), sig(other.privateKey), body)).toBe(true);
  });

  it('refuses another key, an unknown id, a changed byte, a missing or malformed header, a P1363 signature', () => {
    expect(verifyReport(keys, ID, sig(other.privateKey), body)).toBe(false);
    expect(verifyReport(keys, 'ff'.repeat(32), sig(p256.privateKey), body)).toBe(false);
    expect(verifyReport(keys, ID, sig(p256.privateKey), Buffer.from(`${body.toString()} `))).toBe(false);
    expect(verifyReport(keys, undefined, sig(p256.privateKey), body)).toBe(false);
    expect(verifyReport(keys, ID, undefined, body)).toBe(false);
    expect(verifyReport(keys, ID, 'AAAA', body)).toBe(false);
    expect(verifyReport(keys, ID, '!!', body)).toBe(false);
    const p1363 = sign('sha256', body, { key: p256.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64');
    expect(verifyReport(keys, ID, p1363, body)).toBe(false);
  });
});
