import { chmodSync, mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify, type JWTPayload } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { newAssertionKey } from '../../src/assertion/assertion-keys.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH, PUBLISHED_WITHIN } from '../helpers/constants.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';

const SECRET = 'assert-secret-0123456789abcdef';
const AUDIENCE = 'https://orders.internal';
const TYP = 'keygate-assertion+jwt';
const KEYS = [
  makeKey({ apiKey: 'owned', secret: SECRET, id: 'key-owned', owner: 'acct-7', scopes: ['accounts:read', 'x:y'] }),
  makeKey({ apiKey: 'plain', secret: SECRET, id: 'key-plain', scopes: ['accounts:read'] }),
];
const POLICY = `
routes:
  - { method: GET, path: /api/v3/viewer/accounts, scopes: [accounts:read] }
public:
  - { method: GET, path: /status }
`;

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'keygate-assertion-'));
}

/** Writes a JWK Set the way an operator's tooling does: a new file renamed over the old one, mode 0600. */
function writeJwks(file: string, keys: readonly Record<string, string>[]) {
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, JSON.stringify({ keys }), { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, file);
}

const publicOnly = (k: Record<string, string>) => Object.fromEntries(Object.entries(k).filter(([n]) => n !== 'd'));

/**
 * The upstream's side: jose (an implementation independent of Keygate's signer) against the JWK Set
 * fetched from the admin port, with the checks an upstream makes (typ, aud, iss, exp, alg).
 */
function upstreamVerifier(adminUrl: string) {
  const jwks = createRemoteJWKSet(new URL(`${adminUrl}/.well-known/jwks.json`));
  const verify = async (assertion: string) =>
    jwtVerify(assertion, jwks, {
      audience: AUDIENCE,
      issuer: 'keygate',
      typ: TYP,
      algorithms: ['EdDSA', 'ES256'],
    });
  return { jwks, verify };
}

async function startWith(upstream: RecordingUpstream, env: Record<string, string>) {
  const dir = tempDir();
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, POLICY);
  return startKeygate({ upstream: upstream.url, keys: KEYS, env: { KEYGATE_CONFIG: policy, ...env } });
}

describe('X-Keygate-Assertion, identity mode: what the upstream receives and can verify', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let keyFile: string;
  let signingKey: Record<string, string>;
  let verifier: ReturnType<typeof upstreamVerifier>;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    keyFile = join(tempDir(), 'assertion-keys.json');
    signingKey = newAssertionKey('EdDSA', 'ed-1');
    writeJwks(keyFile, [signingKey, publicOnly(newAssertionKey('ES256', 'es-next'))]);
    gate = await startWith(upstream, {
      KEYGATE_ASSERTION_KEYS_FILE: keyFile,
      KEYGATE_ASSERTION_AUDIENCE: AUDIENCE,
    });
    verifier = upstreamVerifier(gate.adminUrl);
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });
  beforeEach(() => upstream.reset());

  it('every forwarded request carries an assertion that verifies, and its claims are the key record', async () => {
    for (const key of KEYS) {
      for (let i = 0; i < 3; i++) {
        const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token(key.apiKey, SECRET)) });
        expect(res.status).toBe(200);
      }
    }
    expect(upstream.received).toHaveLength(6);
    for (const [i, got] of upstream.received.entries()) {
      const key = KEYS[Math.floor(i / 3)]!;
      const assertion = got.headers['x-keygate-assertion'];
      expect(typeof assertion).toBe('string');
      const { payload, protectedHeader } = await verifier.verify(assertion as string);
      expect(protectedHeader).toEqual({ alg: 'EdDSA', kid: 'ed-1', typ: TYP });
      const expected: JWTPayload = {
        iss: 'keygate',
        aud: AUDIENCE,
        sub: key.id,
        scope: key.scopes.join(' '),
        iat: expect.any(Number) as number,
        exp: expect.any(Number) as number,
        ...(key.owner !== undefined && { owner: key.owner }),
      };
      expect(payload).toEqual(expected);
      expect(payload.exp! - payload.iat!).toBe(60);
      // The identity headers say the same thing, unsigned.
      expect(got.headers['x-api-key-id']).toBe(key.id);
    }
  });

  it('publishes the public part of every key, never d, with a short Cache-Control', async () => {
    const res = await send(gate.adminUrl, '/.well-known/jwks.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/jwk-set+json');
    expect(res.headers['cache-control']).toBe('public, max-age=60');
    const set = res.json() as { keys: Record<string, string>[] };
    expect(set.keys.map((k) => k.kid)).toEqual(['ed-1', 'es-next']);
    for (const k of set.keys) expect(k).not.toHaveProperty('d');
    expect(res.body).not.toContain(signingKey.d);
    // Not on the proxy port.
    expect((await send(gate.url, '/.well-known/jwks.json')).status).not.toBe(200);
  });

  it('identity mode signs once per key and serves the cache after that', async () => {
    const before = parseExposition((await send(gate.adminUrl, '/metrics')).body);
    for (let i = 0; i < 5; i++) await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('plain', SECRET)) });
    const after = parseExposition((await send(gate.adminUrl, '/metrics')).body);
    const signed = (m: typeof before) => valueOf(m, 'keygate_assertions_signed_total', { mode: 'identity' }) ?? 0;
    const hits = (m: typeof before) => valueOf(m, 'keygate_assertion_cache_hits_total', {}) ?? 0;
    // Earlier tests signed for this key already (TTL 60 s, refreshed after 45 s): all five are cache hits.
    expect(signed(after) - signed(before)).toBe(0);
    expect(hits(after) - hits(before)).toBe(5);
    const tokens = new Set(upstream.received.map((r) => r.headers['x-keygate-assertion']));
    expect(tokens.size).toBe(1);
  });

  it("a client's own X-Keygate-Assertion never reaches the upstream: protected and public routes", async () => {
    const forged = 'eyJhbGciOiJub25lIn0.eyJzdWIiOiJhZG1pbiJ9.';
    const spellings = { 'X-Keygate-Assertion': forged, x_keygate_assertion: forged, 'X.Keygate.Assertion': forged };
    const authed = await send(gate.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token('plain', SECRET)), ...spellings },
    });
    expect(authed.status).toBe(200);
    const open = await send(gate.url, '/status', { headers: spellings });
    expect(open.status).toBe(200);
    expect(upstream.received).toHaveLength(2);
    const [withKey, publicRoute] = upstream.received;
    const names = (raw: string[]) => raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    expect(names(withKey!.rawHeaders).filter((n) => n.replace(/[^a-z]/g, '') === 'xkeygateassertion')).toEqual([
      'x-keygate-assertion',
    ]);
    expect(withKey!.headers['x-keygate-assertion']).not.toBe(forged);
    await verifier.verify(withKey!.headers['x-keygate-assertion'] as string);
    // A public route has no key, so no identity and no assertion at all.
    expect(names(publicRoute!.rawHeaders).filter((n) => n.replace(/[^a-z]/g, '') === 'xkeygateassertion')).toEqual([]);
    expect(upstream.wire()).not.toContain(forged);
  });

  it('a refused request forwards nothing, so it carries no assertion anywhere', async () => {
    const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('plain', 'wrong-secret-0123456789abc')) });
    expect(res.status).toBe(401);
    expect(res.headers['x-keygate-assertion']).toBeUndefined();
    expect(upstream.received).toHaveLength(0);
  });
});

describe('X-Keygate-Assertion, request mode', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const keyFile = join(tempDir(), 'assertion-keys.json');
    writeJwks(keyFile, [newAssertionKey('ES256', 'es-1')]);
    gate = await startWith(upstream, {
      KEYGATE_ASSERTION_KEYS_FILE: keyFile,
      KEYGATE_ASSERTION_AUDIENCE: AUDIENCE,
      KEYGATE_ASSERTION_MODE: 'request',
      KEYGATE_ASSERTION_TTL_SECONDS: '30',
    });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('binds each assertion to the request: jti = X-Request-Id, htm, htu as forwarded (origin-form)', async () => {
    const { verify } = upstreamVerifier(gate.adminUrl);
    const target = `${ACCOUNTS_PATH}?limit=5&a=%2F`;
    for (const id of ['req-1', 'req-2']) {
      const res = await send(gate.url, target, {
        headers: { ...bearer(token('owned', SECRET)), 'x-request-id': id },
      });
      expect(res.status).toBe(200);
    }
    expect(upstream.received).toHaveLength(2);
    const seen = new Set<string>();
    for (const [i, got] of upstream.received.entries()) {
      const assertion = got.headers['x-keygate-assertion'] as string;
      seen.add(assertion);
      expect(decodeProtectedHeader(assertion)).toEqual({ alg: 'ES256', kid: 'es-1', typ: TYP });
      const { payload } = await verify(assertion);
      expect(payload).toMatchObject({
        sub: 'key-owned',
        owner: 'acct-7',
        scope: 'accounts:read x:y',
        jti: `req-${i + 1}`,
        htm: 'GET',
        htu: got.url,
      });
      expect(got.url).toBe(target);
      expect(got.headers['x-request-id']).toBe(payload.jti);
      expect(payload.exp! - payload.iat!).toBe(30);
    }
    expect(seen.size).toBe(2);
  });
});

describe('X-Keygate-Assertion: rotation in three file rewrites under a steady stream', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let keyFile: string;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    keyFile = join(tempDir(), 'assertion-keys.json');
  });
  afterAll(async () => {
    await gate?.close();
    await upstream.close();
  });

  it('publish the new key, switch signing, retire the old one: no request fails verification upstream', async () => {
    const oldKey = newAssertionKey('EdDSA', 'old');
    const newKey = newAssertionKey('ES256', 'new');
    writeJwks(keyFile, [oldKey]);
    gate = await startWith(upstream, { KEYGATE_ASSERTION_KEYS_FILE: keyFile, KEYGATE_ASSERTION_AUDIENCE: AUDIENCE });
    const verifier = upstreamVerifier(gate.adminUrl);
    // The upstream verifies each request as it arrives and answers 401 when the assertion does not verify.
    const failures: string[] = [];
    const kids = new Set<string>();
    upstream.handler = (req, res) => {
      verifier.verify(String(req.headers['x-keygate-assertion'])).then(
        ({ protectedHeader }) => {
          kids.add(protectedHeader.kid!);
          res.end('ok');
        },
        (err: Error) => {
          failures.push(`${(err as { code?: string }).code ?? err.message}`);
          res.statusCode = 401;
          res.end('bad assertion');
        },
      );
    };
    let streaming = true;
    const statuses: number[] = [];
    const stream = (async () => {
      while (streaming) {
        const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('owned', SECRET)) });
        statuses.push(res.status);
      }
    })();
    const published = async (want: string[]) => {
      await expect
        .poll(
          async () =>
            ((await send(gate.adminUrl, '/.well-known/jwks.json')).json() as { keys: { kid: string }[] }).keys.map(
              (k) => k.kid,
            ),
          PUBLISHED_WITHIN,
        )
        .toEqual(want);
    };
    const signsWith = async (kid: string) => {
      const seenBefore = statuses.length;
      await expect
        .poll(async () => {
          const res = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('plain', SECRET)) });
          return res.status === 200 && kids.has(kid) && statuses.length > seenBefore;
        }, PUBLISHED_WITHIN)
        .toBe(true);
    };
    await signsWith('old');

    // 1. Publish the new key (public part only: nothing can sign with it yet); wait for the verifier's cache.
    writeJwks(keyFile, [oldKey, publicOnly(newKey)]);
    await published(['old', 'new']);
    await verifier.jwks.reload();
    // 2. Switch signing: the new key gets its private part and goes first; the old one stays published.
    writeJwks(keyFile, [newKey, publicOnly(oldKey)]);
    await published(['new', 'old']);
    await signsWith('new');
    // 3. Retire the old key (after one TTL plus cache time in production; here once nothing signed with it is in flight).
    writeJwks(keyFile, [newKey]);
    await published(['new']);
    await verifier.jwks.reload();
    const afterRetire = statuses.length;
    await expect.poll(() => statuses.length > afterRetire + 5, PUBLISHED_WITHIN).toBe(true);
    streaming = false;
    await stream;

    expect(failures).toEqual([]);
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect([...kids].sort()).toEqual(['new', 'old']);
  });
});
