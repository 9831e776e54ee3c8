import { generateKeyPairSync, sign as rsaSign } from 'node:crypto';
import fc from 'fast-check';
import { compactVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { decodeToken } from '../../src/pipeline/decode-token.js';
import { verifySignature } from '../../src/pipeline/verify-signature.js';
import { prepareKey } from '../../src/keys/prepared-key.js';
import { makeKey } from '../helpers/make-key.js';
import { b64url, HS256, sign } from '../helpers/tokens.js';
import { guard } from '../helpers/slowdown.js';

/**
 * Keygate's token acceptance against jose's on 2,000 random tokens, and the cases that property draws, pinned:
 * moved out of the unit tier (test/unit/verify-signature.test.ts keeps the table), which must stay quick (issue 40).
 */
const OPTS = { maxTokenBytes: 4096, defaultRecvWindowSeconds: 30, maxRecvWindowSeconds: 60 };
const NOW_MS = Date.parse('2026-11-22T09:00:00Z');
const SECRET = 'table-secret-0123456789abcdef';
const B64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const payload = { type: 'OpenAPIV2', sub: 'k', nonce: '1795330124122000000' };

/** Keygate's keys for one record, through the real import path (key-cache.ts). */
function keysFor(secret: string, previous: Array<{ secret: string; validUntil: string }> = []) {
  return prepareKey(makeKey({ apiKey: 'k', secret, ...(previous.length > 0 && { previousSecrets: previous }) }))
    .verifyKeys;
}

// ---------------------------------------------------------------------------
// Differential property test: Keygate's full acceptance (decodeToken's
// structural checks, then verifySignature) against jose's compactVerify pinned
// to HS256, for the same token and secret.
//
// Where they may differ, Keygate is deliberately stricter, and only in
// decodeToken (never in the signature check):
//  - non-canonical base64url: the last character of a 43-character signature
//    carries 2 spare bits. jose decodes forgivingly, so four spellings of one
//    signature verify there; decodeToken accepts only the one with zero spare
//    bits ('malformed'), so a token has exactly one accepted spelling.
//  - the header: decodeToken also wants typ JWT and no crit/b64 ('bad_header');
//    jose pinned to HS256 already refuses none/HS384/HS512/RS256 by itself.
// So agreement means: Keygate accepts ⇒ jose accepts, always; and for tokens
// decodeToken lets through (canonical HS256 contract tokens), jose accepts ⇔
// Keygate accepts. Every disagreement must be one of the two above.
//
// compactVerify checks the JWS only, not exp/nbf (check-time.ts is Keygate's
// step for those), so tokens with past, future or absent exp/nbf must get the
// same signature verdict from both.
// ---------------------------------------------------------------------------

type Accepted = { keygate: boolean; decodeReason?: string; jose: boolean };

async function joseAccepts(token: string, secret: string): Promise<boolean> {
  try {
    await compactVerify(token, new TextEncoder().encode(secret), { algorithms: ['HS256'] });
    return true;
  } catch {
    return false;
  }
}

async function judge(token: string, secret: string): Promise<Accepted> {
  const decoded = decodeToken(token, OPTS);
  const jose = await joseAccepts(token, secret);
  if (!decoded.ok) return { keygate: false, decodeReason: decoded.reason, jose };
  return { keygate: verifySignature(token, 'HS256', keysFor(secret), NOW_MS).ok, jose };
}

/** Every base64url segment has the one spelling its bytes re-encode to. */
function canonical(token: string): boolean {
  return token
    .split('.')
    .every((seg) => /^[A-Za-z0-9_-]*$/.test(seg) && Buffer.from(seg, 'base64url').toString('base64url') === seg);
}

const rsa = generateKeyPairSync('rsa', { modulusLength: 1024 });

const secretArb = fc.oneof(
  fc.string({ unit: 'grapheme-ascii', minLength: 16, maxLength: 48 }),
  fc.string({ unit: 'binary', minLength: 16, maxLength: 32 }),
);
const timeArb = fc.option(
  fc.oneof(fc.integer({ min: 0, max: 4_102_444_800 }), fc.double({ noNaN: true, noDefaultInfinity: true })),
  { nil: undefined },
);
const payloadArb = fc
  .record(
    {
      type: fc.constant('OpenAPIV2'),
      sub: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }),
      nonce: fc.bigInt({ min: 0n, max: 99_999_999_999_999_999_999n }).map(String),
      recv_window: fc.integer({ min: 1, max: 60 }).map(String),
      exp: timeArb,
      nbf: timeArb,
    },
    { requiredKeys: ['type', 'sub', 'nonce'] },
  )
  .map((p) => Object.fromEntries(Object.entries(p).filter(([, v]) => v !== undefined)));

/** How the token is signed, relative to the secret Keygate and jose verify with. */
type Signer = 'right' | 'other' | 'base64' | 'base64url' | 'prefix' | 'suffixed';
const signerArb = fc.constantFrom<Signer>(
  'right',
  'right',
  'right',
  'other',
  'base64',
  'base64url',
  'prefix',
  'suffixed',
);
const headerArb = fc.constantFrom(
  'HS256',
  'HS256',
  'HS256',
  'HS256',
  'HS256 no typ',
  'none, empty signature',
  'none, HS256 signature',
  'HS384',
  'HS512',
  'HS384 header, HS256 signature',
  'RS256',
  'RS256 header, HS256 signature',
);
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof<fc.Arbitrary<Mutation>[]>(
  fc.constant({ kind: 'none' as const }),
  fc.record({
    kind: fc.constantFrom('flip header' as const, 'flip payload' as const, 'flip signature' as const),
    at: fc.nat(),
    bit: fc.integer({ min: 0, max: 6 }),
  }),
  fc.record({ kind: fc.constant('respell last' as const), spare: fc.integer({ min: 1, max: 3 }) }),
);

function signingSecret(signer: Signer, secret: string, other: string): string | Buffer {
  switch (signer) {
    case 'right':
      return secret;
    case 'other':
      return other;
    case 'base64':
      return Buffer.from(secret).toString('base64');
    case 'base64url':
      return Buffer.from(secret).toString('base64url');
    case 'prefix':
      return secret.slice(0, -1);
    case 'suffixed':
      return `${secret}\0`;
  }
}

function build(header: string, p: Record<string, unknown>, key: string | Buffer): string {
  const ps = b64url(JSON.stringify(p));
  const hs = (h: unknown) => b64url(JSON.stringify(h));
  switch (header) {
    case 'HS256':
      return sign(HS256, p, key);
    case 'HS256 no typ':
      return sign({ alg: 'HS256' }, p, key);
    case 'none, empty signature':
      return `${hs({ alg: 'none', typ: 'JWT' })}.${ps}.`;
    case 'none, HS256 signature':
      return sign({ alg: 'none', typ: 'JWT' }, p, key);
    case 'HS384':
      return sign({ alg: 'HS384', typ: 'JWT' }, p, key, 'sha384');
    case 'HS512':
      return sign({ alg: 'HS512', typ: 'JWT' }, p, key, 'sha512');
    case 'HS384 header, HS256 signature':
      return sign({ alg: 'HS384', typ: 'JWT' }, p, key);
    case 'RS256': {
      const h = hs({ alg: 'RS256', typ: 'JWT' });
      return `${h}.${ps}.${b64url(rsaSign('sha256', Buffer.from(`${h}.${ps}`), rsa.privateKey))}`;
    }
    case 'RS256 header, HS256 signature':
      return sign({ alg: 'RS256', typ: 'JWT' }, p, key);
    default:
      throw new Error(`unknown header case ${header}`);
  }
}

type Mutation =
  | { kind: 'none' }
  | { kind: 'flip header' | 'flip payload' | 'flip signature'; at: number; bit: number }
  | { kind: 'respell last'; spare: number };

function mutate(token: string, m: Mutation): string {
  const parts = token.split('.');
  if (m.kind === 'respell last') {
    const s = parts[2]!;
    const i = B64URL.indexOf(s.at(-1) ?? '');
    if (i < 0) return token;
    // Same top 4 bits, other spare bits: the same 32 bytes spelt another way (for a 43-character signature).
    parts[2] = s.slice(0, -1) + B64URL[(i & ~3) | ((i & 3) ^ m.spare)];
    return parts.join('.');
  }
  if (m.kind === 'none') return token;
  const index = { 'flip header': 0, 'flip payload': 1, 'flip signature': 2 }[m.kind];
  const seg = parts[index]!;
  if (seg.length === 0) return token;
  const at = m.at % seg.length;
  parts[index] = seg.slice(0, at) + String.fromCharCode(seg.charCodeAt(at) ^ (1 << m.bit)) + seg.slice(at + 1);
  return parts.join('.');
}

describe('verifySignature: differential against jose compactVerify (HS256)', () => {
  it(
    'Keygate accepts ⇒ jose accepts; for tokens decodeToken passes, jose accepts ⇒ Keygate accepts',
    async () => {
      const seen = { bothAccept: 0, bothRefuse: 0, stricterSpelling: 0, refusedBySignature: 0 };
      await fc.assert(
        fc.asyncProperty(
          secretArb,
          fc.string({ minLength: 16, maxLength: 40 }),
          payloadArb,
          headerArb,
          signerArb,
          mutationArb,
          async (secret, otherRaw, p, header, signer, mutation) => {
            const other = otherRaw === secret ? `${otherRaw}!` : otherRaw;
            const token = mutate(build(header, p, signingSecret(signer, secret, other)), mutation);
            const r = await judge(token, secret);

            if (r.keygate) expect(r.jose).toBe(true);
            if (r.decodeReason === undefined) expect(r.keygate).toBe(r.jose);
            if (r.jose && !r.keygate) {
              // The only allowed disagreements (see the comment above).
              if (r.decodeReason === 'malformed') expect(canonical(token)).toBe(false);
              else expect(r.decodeReason).toBe('bad_header');
              if (r.decodeReason === 'malformed') seen.stricterSpelling++;
            }
            if (r.keygate && r.jose) seen.bothAccept++;
            if (!r.keygate && !r.jose) seen.bothRefuse++;
            if (r.decodeReason === undefined && !r.keygate) seen.refusedBySignature++;
          },
        ),
        { numRuns: 2_000 },
      );
      // The run exercised each side of the property, so it could have failed.
      expect(seen.bothAccept).toBeGreaterThan(50);
      expect(seen.bothRefuse).toBeGreaterThan(50);
      expect(seen.refusedBySignature).toBeGreaterThan(50);
      expect(seen.stricterSpelling).toBeGreaterThan(0);
    },
    guard(60_000),
  );

  // Named cases the property draws at random, pinned so each is checked every run.
  const p = { ...payload, exp: 1, nbf: 4_102_444_800 }; // exp long past, nbf far ahead: compactVerify ignores both
  const good = sign(HS256, p, SECRET);
  const [h, ps, s] = good.split('.') as [string, string, string];
  const respelled = s.slice(0, -1) + B64URL[(B64URL.indexOf(s.at(-1)!) & ~3) | 1];
  const pinned: Array<[name: string, token: string, keygate: boolean, jose: boolean]> = [
    ['valid, with exp and nbf', good, true, true],
    ['valid, no exp or nbf', sign(HS256, payload, SECRET), true, true],
    ['signed with the Base64 of the secret', sign(HS256, p, Buffer.from(SECRET).toString('base64')), false, false],
    [
      'signed with the base64url of the secret',
      sign(HS256, p, Buffer.from(SECRET).toString('base64url')),
      false,
      false,
    ],
    [
      'one bit flipped in the header',
      `${h.slice(0, 3)}${String.fromCharCode(h.charCodeAt(3) ^ 1)}${h.slice(4)}.${ps}.${s}`,
      false,
      false,
    ],
    [
      'one bit flipped in the payload',
      `${h}.${ps.slice(0, 5)}${String.fromCharCode(ps.charCodeAt(5) ^ 4)}${ps.slice(6)}.${s}`,
      false,
      false,
    ],
    [
      'one bit flipped in the signature',
      `${h}.${ps}.${String.fromCharCode(s.charCodeAt(0) ^ 2)}${s.slice(1)}`,
      false,
      false,
    ],
    ['alg none, empty signature', build('none, empty signature', p, SECRET), false, false],
    ['alg HS384', build('HS384', p, SECRET), false, false],
    ['alg HS512', build('HS512', p, SECRET), false, false],
    ['alg RS256', build('RS256', p, SECRET), false, false],
    ['RS256 header over an HS256 signature', build('RS256 header, HS256 signature', p, SECRET), false, false],
    // Deliberately stricter: jose accepts these, Keygate does not.
    ['non-canonical last signature character', `${h}.${ps}.${respelled}`, false, true],
    ['HS256 without typ', build('HS256 no typ', p, SECRET), false, true],
  ];
  it.each(pinned)('%s', async (_name, token, keygate, jose) => {
    const r = await judge(token, SECRET);
    expect({ keygate: r.keygate, jose: r.jose }).toEqual({ keygate, jose });
  });
});
