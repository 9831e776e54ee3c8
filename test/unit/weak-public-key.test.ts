import { createPublicKey, createECDH, generateKeyPairSync, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { importPublicKey } from '../../src/keys/public-key.js';
import {
  ecSpkiProblem,
  ed25519PointProblem,
  P256_FORM_PROBLEM,
  publicKeyProblem,
} from '../../src/keys/weak-public-key.js';

const hex = (s: string) => Buffer.from(s, 'hex');
const ed25519Spki = (point: Buffer) =>
  createPublicKey({ key: Buffer.concat([hex('302a300506032b6570032100'), point]), format: 'der', type: 'spki' });
const p256Spki = (point: Buffer) => {
  const bits = Buffer.concat([Buffer.from([0x03, point.length + 1, 0x00]), point]);
  const body = Buffer.concat([hex('301306072a8648ce3d020106082a8648ce3d030107'), bits]);
  return Buffer.concat([Buffer.from([0x30, body.length]), body]);
};

// The 8 points of order 1, 2, 4 and 8, canonically encoded (libsodium's blocklist; RFC 8032 §5.1.3 decoding).
const SMALL_ORDER: Array<[string, string]> = [
  ['identity (order 1)', '0100000000000000000000000000000000000000000000000000000000000000'],
  ['order 2 (y = p - 1)', 'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f'],
  ['order 4 (y = 0, x even)', '0000000000000000000000000000000000000000000000000000000000000000'],
  ['order 4 (y = 0, x odd)', '0000000000000000000000000000000000000000000000000000000000000080'],
  ['order 8', '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05'],
  ['order 8', '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc85'],
  [
    'order 8 ("Taming the many EdDSAs" vectors 0 and 1: A)',
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  ],
  [
    'order 8 ("Taming the many EdDSAs" vectors 0 and 1: A)',
    'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac03fa',
  ],
];

/** y = p + k (k < 19) fits in 255 bits: the non-canonical spellings of y = k, with either sign bit. */
function nonCanonicalY(): Array<[string, string]> {
  const p = 2n ** 255n - 19n;
  const out: Array<[string, string]> = [];
  for (let k = 0n; k < 19n; k++)
    for (const sign of [0, 1]) {
      const b = Buffer.alloc(32);
      let y = p + k;
      for (let i = 0; i < 32; i++, y >>= 8n) b[i] = Number(y & 0xffn);
      b[31] = (b[31] as number) | (sign << 7);
      out.push([`y = p + ${k}, sign ${sign}`, b.toString('hex')]);
    }
  return out;
}

describe('Ed25519: RFC 8032 §5.1.3 decoding and the small-order set', () => {
  it.each(SMALL_ORDER)('%s is refused as small-order', (_name, point) => {
    expect(ed25519PointProblem(hex(point))).toMatch(/small-order/);
  });
  it.each([
    // "Taming the many EdDSAs" vectors 10 and 11: A = the order-2 point with the sign bit set (x = 0).
    ['x = 0 with the sign bit (order 2)', 'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff'],
    ['x = 0 with the sign bit (identity)', '0100000000000000000000000000000000000000000000000000000000000080'],
    ...nonCanonicalY(),
  ])('%s is refused as non-canonical', (_name, point) => {
    expect(ed25519PointProblem(hex(point))).toMatch(/non-canonical/);
  });
  it('a y with no x on the curve is refused', () => {
    // y = 2: (y² - 1)/(d y² + 1) is not a square mod p.
    expect(ed25519PointProblem(hex('02'.padEnd(64, '0')))).toMatch(/not a point on the Ed25519 curve/);
  });
  it.each([
    // "Taming the many EdDSAs" vectors 2-9: A of mixed order (a small-order component beside a large one),
    // or of prime order. Nobody without the private key signs for them, so they are accepted (docs/security.md).
    ['vectors 2, 8, 9', 'f7badec5b8abeaf699583992219b7b223f1df3fbbea919844e3f7c554a43dd43'],
    ['vectors 3, 4, 5', 'cdb267ce40c5cd45306fa5d2f29731459387dbf9eb933b7bd5aed9a765b88d4d'],
    ['vectors 6, 7', '442aad9f089ad9e14647b1ef9099a1ff4798d78589e66f28eca69c11f582a623'],
    ['RFC 8032 test 1', 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a'],
  ])('%s: accepted', (_name, point) => {
    expect(ed25519PointProblem(hex(point))).toBeUndefined();
  });
  it('200 generated keys are all accepted', () => {
    for (let i = 0; i < 200; i++) {
      const der = generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'der' });
      expect(ed25519PointProblem(der.subarray(12))).toBeUndefined();
    }
  });
  it('why it matters: node:crypto verifies R = identity, S = 0 for every message under the identity key', () => {
    const identity = ed25519Spki(hex(SMALL_ORDER[0]![1]));
    const forged = Buffer.concat([hex(SMALL_ORDER[0]![1]), Buffer.alloc(32)]);
    for (const msg of ['eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJ4In0', 'anything at all'])
      expect(verify(null, Buffer.from(msg), identity, forged)).toBe(true);
    expect(publicKeyProblem(identity)).toMatch(/small-order/);
  });
});

describe('P-256: what node:crypto refuses itself, and the forms Keygate refuses', () => {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const uncompressed = ecdh.getPublicKey(null, 'uncompressed');
  const offCurve = Buffer.from(uncompressed);
  offCurve[64] = (offCurve[64] as number) ^ 1;
  it.each([
    ['a point off the curve (last bit of y flipped)', offCurve],
    ['(0, 0)', Buffer.concat([Buffer.from([4]), Buffer.alloc(64)])],
  ])('node:crypto refuses %s at import', (_name, point) => {
    expect(() => createPublicKey({ key: p256Spki(point), format: 'der', type: 'spki' })).toThrow();
  });
  it('node:crypto imports the point at infinity (so Keygate checks the DER before it: reading its details aborts the process)', () => {
    const key = createPublicKey({ key: p256Spki(Buffer.from([0])), format: 'der', type: 'spki' });
    expect(key.asymmetricKeyType).toBe('ec');
    expect(ecSpkiProblem(p256Spki(Buffer.from([0])))).toBe(P256_FORM_PROBLEM);
  });
  it.each([
    ['the point at infinity', Buffer.from([0]), P256_FORM_PROBLEM],
    ['off the curve', offCurve, 'not a readable SPKI public key'],
    ['compressed', ecdh.getPublicKey(null, 'compressed'), P256_FORM_PROBLEM],
    ['hybrid', ecdh.getPublicKey(null, 'hybrid'), P256_FORM_PROBLEM],
  ])('importPublicKey refuses %s with one sentence', (_name, point, error) => {
    const pem = `-----BEGIN PUBLIC KEY-----\n${p256Spki(point).toString('base64')}\n-----END PUBLIC KEY-----\n`;
    expect(importPublicKey(pem, 'ES256')).toEqual({ error: expect.stringContaining(error) as string });
  });
  it.each([
    ['compressed', ecdh.getPublicKey(null, 'compressed')],
    ['hybrid', ecdh.getPublicKey(null, 'hybrid')],
  ])('node:crypto imports the %s form; Keygate refuses it', (_name, point) => {
    const key = createPublicKey({ key: p256Spki(point), format: 'der', type: 'spki' });
    expect(publicKeyProblem(key)).toBe(P256_FORM_PROBLEM);
  });
  it('the uncompressed form is accepted', () => {
    expect(
      publicKeyProblem(createPublicKey({ key: p256Spki(uncompressed), format: 'der', type: 'spki' })),
    ).toBeUndefined();
    expect(publicKeyProblem(generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).publicKey)).toBeUndefined();
  });
});
