import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifySignature } from '../../src/pipeline/verify-signature.js';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { makeKey } from '../helpers/make-key.js';
import { b64url, HS256, sign } from '../helpers/tokens.js';

const NOW_MS = Date.parse('2026-11-22T09:00:00Z');
const SECRET = 'table-secret-0123456789abcdef';
const OLD_SECRET = 'old-table-secret-0123456789';
const payload = { type: 'OpenAPIV2', sub: 'k', nonce: '1795330124122000000' };

/** Keygate's keys for one record, through the real import path (key-cache.ts). */
function keysFor(secret: string, previous: Array<{ secret: string; validUntil: string }> = []) {
  return prepareKey(makeKey({ apiKey: 'k', secret, ...(previous.length > 0 && { previousSecrets: previous }) }))
    .verifyKeys;
}

describe('verifySignature: table', () => {
  const good = sign(HS256, payload, SECRET);
  const [h, p] = good.split('.') as [string, string, string];
  const rotated = keysFor(SECRET, [{ secret: OLD_SECRET, validUntil: new Date(NOW_MS + 60_000).toISOString() }]);
  const signedOld = sign(HS256, payload, OLD_SECRET);
  const cases: Array<[name: string, token: string, keys: ReturnType<typeof keysFor>, nowMs: number, ok: boolean]> = [
    ['right secret', good, keysFor(SECRET), NOW_MS, true],
    ['other secret', sign(HS256, payload, 'another-secret-0123456789'), keysFor(SECRET), NOW_MS, false],
    [
      'Base64 of the secret',
      sign(HS256, payload, Buffer.from(SECRET).toString('base64')),
      keysFor(SECRET),
      NOW_MS,
      false,
    ],
    ['secret Base64-decoded', sign(HS256, payload, Buffer.from(SECRET, 'base64')), keysFor(SECRET), NOW_MS, false],
    [
      'non-ASCII secret, signed with its UTF-8 bytes',
      sign(HS256, payload, 'clé-secrète-ünïcode-✓'),
      keysFor('clé-secrète-ünïcode-✓'),
      NOW_MS,
      true,
    ],
    [
      'non-ASCII secret, signed with its Latin-1 bytes',
      sign(HS256, payload, Buffer.from('clé-secrète-ünïcode-é', 'latin1')),
      keysFor('clé-secrète-ünïcode-é'),
      NOW_MS,
      false,
    ],
    ['HS512-length signature (no throw)', sign(HS256, payload, SECRET, 'sha512'), keysFor(SECRET), NOW_MS, false],
    [
      '31-byte signature (no throw)',
      `${h}.${p}.${b64url(createHmac('sha256', SECRET).update(`${h}.${p}`).digest().subarray(0, 31))}`,
      keysFor(SECRET),
      NOW_MS,
      false,
    ],
    ['empty signature', `${h}.${p}.`, keysFor(SECRET), NOW_MS, false],
    ['two segments', `${h}.${p}`, keysFor(SECRET), NOW_MS, false],
    ['four segments, valid first three', `${good}.x`, keysFor(SECRET), NOW_MS, false],
    [
      'signature over header only',
      `${h}.${p}.${b64url(createHmac('sha256', SECRET).update(h).digest())}`,
      keysFor(SECRET),
      NOW_MS,
      false,
    ],
    ['no keys at all', good, [], NOW_MS, false],
    ['rotation: new secret', good, rotated, NOW_MS, true],
    ['rotation: previous secret inside its grace period', signedOld, rotated, NOW_MS + 59_999, true],
    ['rotation: previous secret at its grace period end', signedOld, rotated, NOW_MS + 60_000, false],
    ['rotation: previous secret after its grace period', signedOld, rotated, NOW_MS + 3_600_000, false],
    ['rotation: new secret after the previous one lapsed', good, rotated, NOW_MS + 3_600_000, true],
  ];
  it.each(cases)('%s', (_name, token, keys, nowMs, ok) => {
    const r = verifySignature(token, 'HS256', keys, nowMs);
    if (ok) expect(r).toMatchObject({ ok: true });
    else expect(r).toEqual({ ok: false, code: 40106, reason: 'bad_signature' });
  });
});
