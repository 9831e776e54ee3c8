import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AssertionKeysError, loadAssertionKeys, newAssertionKey } from '../../src/assertion/assertion-keys.js';

function jwksFile(data: unknown, mode = 0o600): string {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-akeys-')), 'keys.json');
  writeFileSync(file, typeof data === 'string' ? data : JSON.stringify(data));
  chmodSync(file, mode);
  return file;
}
const publicOnly = (k: Record<string, string>) => Object.fromEntries(Object.entries(k).filter(([n]) => n !== 'd'));

function problemsOf(file: string, kid?: string): string[] {
  try {
    loadAssertionKeys(file, kid);
  } catch (err) {
    expect(err).toBeInstanceOf(AssertionKeysError);
    return [...(err as AssertionKeysError).problems];
  }
  return [];
}

describe('loadAssertionKeys', () => {
  it('signs with the first key that has a private part, and publishes every key in file order, never d', () => {
    const published = publicOnly(newAssertionKey('ES256', 'next'));
    const a = newAssertionKey('EdDSA', 'a');
    const b = newAssertionKey('ES256', 'b');
    const set = loadAssertionKeys(jwksFile({ keys: [published, a, b] }), undefined);
    expect(set.signing.kid).toBe('a');
    expect(set.jwks.keys.map((k) => [k.kid, k.alg])).toEqual([
      ['next', 'ES256'],
      ['a', 'EdDSA'],
      ['b', 'ES256'],
    ]);
    expect(JSON.stringify(set.jwks)).not.toContain('"d"');
    expect(loadAssertionKeys(jwksFile({ keys: [published, a, b] }), 'b').signing.kid).toBe('b');
  });

  it('lists every problem, naming kids and members but never a key value', () => {
    const good = newAssertionKey('EdDSA', 'dup');
    const other = newAssertionKey('EdDSA', 'other');
    const mismatched = { ...newAssertionKey('EdDSA', 'mismatch'), d: other.d! };
    const problems = problemsOf(
      jwksFile({
        keys: [
          good,
          { ...newAssertionKey('EdDSA'), kid: 'dup' },
          { kty: 'RSA', kid: 'rsa', n: 'x', e: 'AQAB' },
          { ...newAssertionKey('ES256', 'wrong-alg'), alg: 'EdDSA' },
          { ...publicOnly(newAssertionKey('EdDSA')), kid: undefined },
          mismatched,
          { kty: 'EC', crv: 'P-256', kid: 'off-curve', x: 'AAAA', y: 'AAAA' },
        ],
      }),
    );
    const text = problems.join('\n');
    expect(text).toContain('keys[1].kid: duplicate kid "dup"');
    expect(text).toContain('keys[2].n: not a member');
    expect(text).toContain('keys[2]: kty/crv must be OKP/Ed25519 (EdDSA) or EC/P-256 (ES256)');
    expect(text).toContain('keys[3].alg: a P-256 key signs ES256');
    expect(text).toContain('keys[4].kid: required');
    expect(text).toContain('keys[5]: the private part ("d") does not belong to the public part');
    expect(text).toContain('keys[6]: not a valid P-256 key');
    expect(text).not.toContain(other.d);
    expect(text).not.toContain(good.d);
  });

  it('needs something to sign with', () => {
    const pub = publicOnly(newAssertionKey('EdDSA', 'p'));
    expect(problemsOf(jwksFile({ keys: [pub] })).join()).toContain('no key with a private part');
    expect(problemsOf(jwksFile({ keys: [pub, newAssertionKey('EdDSA', 's')] }), 'p').join()).toContain(
      'names "p", which has no private part',
    );
    expect(problemsOf(jwksFile({ keys: [newAssertionKey('EdDSA', 's')] }), 'gone').join()).toContain(
      'names "gone", not in the file',
    );
    expect(problemsOf(jwksFile({ keys: [] })).join()).toContain('expected a JWK Set');
  });

  it('refuses a file other users can open, and hides the text of a broken one', () => {
    const key = newAssertionKey('EdDSA', 'k');
    expect(problemsOf(jwksFile({ keys: [key] }, 0o644)).join()).toContain('open to other users (mode 0644)');
    expect(problemsOf(jwksFile({ keys: [key] }, 0o640))).toEqual([]);
    const broken = problemsOf(jwksFile(`{"keys":[{"d":"${key.d}",]}`)).join();
    expect(broken).toContain('not valid JSON');
    expect(broken).not.toContain(key.d);
  });
});
