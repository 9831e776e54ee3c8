import { execFile, spawnSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createToken } from '../../src/client/create-token.js';
import { parseKeyRecord, type KeyRecord } from '../../src/keys/key-record.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { HS256, b64url, claims, sign, signWithKey } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

/**
 * EdDSA and ES256 keys end to end, over real sockets, with the memory store
 * and a real redis-server: tokens from the client module and from PyJWT pass,
 * a replay and another key pair are 40106, and the alg-confusion table is
 * 40106 with nothing reaching the upstream.
 */
const run = promisify(execFile);
const pair = (alg: 'EdDSA' | 'ES256') =>
  alg === 'EdDSA' ? generateKeyPairSync('ed25519') : generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
const pem = (k: KeyObject) => k.export({ type: 'spki', format: 'pem' }).toString();
const ED = pair('EdDSA');
const ES = pair('ES256');
const OTHER_ED = pair('EdDSA');
const OTHER_ES = pair('ES256');
const HS_SECRET = 'hs-secret-0123456789abcdef';
const ED_HEADER = { alg: 'EdDSA', typ: 'JWT' };
const ES_HEADER = { alg: 'ES256', typ: 'JWT' };

function asymmetricKey(apiKey: string, alg: 'EdDSA' | 'ES256', publicKey: KeyObject): KeyRecord {
  const { record, errors } = parseKeyRecord(
    { apiKey, id: `id-${apiKey}`, alg, publicKey: pem(publicKey), scopes: ['accounts:read'] },
    'test key',
  );
  if (!record) throw new Error(errors.join('; '));
  return record;
}

const KEYS = [
  asymmetricKey('ed', 'EdDSA', ED.publicKey),
  asymmetricKey('es', 'ES256', ES.publicKey),
  makeKey({ apiKey: 'hs', secret: HS_SECRET }),
];

/** A python3 with PyJWT and cryptography (Debian's python3-jwt python3-cryptography), or a failure naming them. */
function pythonWithJwt(): string {
  for (const py of ['python3', '/usr/bin/python3'])
    if (spawnSync(py, ['-c', 'import jwt, cryptography'], { stdio: 'ignore' }).status === 0) return py;
  throw new Error('no python3 with PyJWT and cryptography: apt-get install -y python3-jwt python3-cryptography');
}

/** Each row: a token Keygate must answer 401 40106, and must never forward. */
const CONFUSION: Array<[string, () => string]> = [
  [
    'HS256 token for an EdDSA key, signed with the PEM text as the HMAC secret',
    () => sign(HS256, claims('ed'), pem(ED.publicKey)),
  ],
  [
    'HS256 token for an EdDSA key, signed with the DER bytes as the HMAC secret',
    () => sign(HS256, claims('ed'), ED.publicKey.export({ type: 'spki', format: 'der' })),
  ],
  ['HS256 token for an ES256 key, signed with the PEM text', () => sign(HS256, claims('es'), pem(ES.publicKey))],
  ['ES256 token for an EdDSA key (signed by a P-256 key)', () => signWithKey(ES_HEADER, claims('ed'), ES.privateKey)],
  ['ES256 header on the EdDSA key’s own Ed25519 signature', () => signWithKey(ES_HEADER, claims('ed'), ED.privateKey)],
  [
    'EdDSA token for an ES256 key (signed by its Ed25519 key)',
    () => signWithKey(ED_HEADER, claims('es'), ED.privateKey),
  ],
  ['EdDSA header on the ES256 key’s own r‖s signature', () => signWithKey(ED_HEADER, claims('es'), ES.privateKey)],
  ['EdDSA token for an HS256 key', () => signWithKey(ED_HEADER, claims('hs'), ED.privateKey)],
  ['ES256 token for an HS256 key', () => signWithKey(ES_HEADER, claims('hs'), ES.privateKey)],
  [
    'alg none, empty signature',
    () => `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${b64url(JSON.stringify(claims('ed')))}.`,
  ],
  ['alg none, an Ed25519 signature', () => signWithKey({ alg: 'none', typ: 'JWT' }, claims('ed'), ED.privateKey)],
  ['alg Ed25519 (not the JWS name)', () => signWithKey({ alg: 'Ed25519', typ: 'JWT' }, claims('ed'), ED.privateKey)],
  ['alg ES384', () => signWithKey({ alg: 'ES384', typ: 'JWT' }, claims('es'), ES.privateKey)],
  ['DER-encoded ES256 signature by the right key', () => signWithKey(ES_HEADER, claims('es'), ES.privateKey, 'der')],
  [
    'header jwk carrying another public key, signed by its private key',
    () =>
      signWithKey(
        { ...ED_HEADER, jwk: OTHER_ED.publicKey.export({ format: 'jwk' }) },
        claims('ed'),
        OTHER_ED.privateKey,
      ),
  ],
  [
    'header jku pointing elsewhere, signed by that key',
    () => signWithKey({ ...ED_HEADER, jku: 'https://attacker.example/jwks.json' }, claims('ed'), OTHER_ED.privateKey),
  ],
  [
    'header x5u pointing elsewhere, signed by that key',
    () => signWithKey({ ...ES_HEADER, x5u: 'https://attacker.example/cert.pem' }, claims('es'), OTHER_ES.privateKey),
  ],
  [
    'header kid naming another key, signed by another key pair',
    () => signWithKey({ ...ED_HEADER, kid: 'es' }, claims('ed'), OTHER_ED.privateKey),
  ],
  ['token signed by another Ed25519 key pair', () => signWithKey(ED_HEADER, claims('ed'), OTHER_ED.privateKey)],
  ['token signed by another P-256 key pair', () => signWithKey(ES_HEADER, claims('es'), OTHER_ES.privateKey)],
];

describe.each(['memory', 'redis'] as const)('EdDSA and ES256 keys (%s store)', (storeKind) => {
  let redis: TestRedis | undefined;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let dir: string;
  beforeAll(async () => {
    if (storeKind === 'redis') redis = await startRedis();
    upstream = await startRecordingUpstream();
    gate = await startKeygate({ upstream: upstream.url, keys: KEYS, ...(redis && { redisUrl: redis.url }) });
    dir = mkdtempSync(join(tmpdir(), 'keygate-asym-'));
    writeFileSync(join(dir, 'ed.pem'), ED.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(join(dir, 'es.pem'), ES.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(() => upstream.reset());

  const call = (t: string) => send(gate.url, ACCOUNTS_PATH, { headers: bearer(t) });

  it.each([
    ['EdDSA', 'ed', ED.privateKey],
    ['ES256', 'es', ES.privateKey],
  ] as const)('a client-module %s token passes, and its replay is 40106', async (_alg, apiKey, privateKey) => {
    const t = await createToken({ apiKey, privateKey });
    const first = await call(t);
    expect(first.status).toBe(200);
    expect(upstream.received).toHaveLength(1);
    expect(upstream.received[0]!.headers['x-api-key-id']).toBe(`id-${apiKey}`);
    expect(upstream.received[0]!.headers.authorization).toBeUndefined();
    const replay = await call(t);
    expect([replay.status, replay.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
    expect(upstream.received).toHaveLength(1);
  });

  it('a client-module token from a PEM string passes (the alg follows from the key type)', async () => {
    const privateKey = ES.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    expect((await call(await createToken({ apiKey: 'es', privateKey, recvWindow: 10 }))).status).toBe(200);
  });

  it('HS256 keys are unchanged beside them', async () => {
    expect((await call(await createToken({ apiKey: 'hs', apiSecret: HS_SECRET }))).status).toBe(200);
  });

  it.each([
    ['EdDSA', 'ed'],
    ['ES256', 'es'],
  ])('a PyJWT %s token (examples/python_signed_client.py) passes', async (_alg, apiKey) => {
    const { stdout } = await run(pythonWithJwt(), [
      'examples/python_signed_client.py',
      `${gate.url}${ACCOUNTS_PATH}`,
      apiKey,
      join(dir, `${apiKey}.pem`),
    ]);
    expect(stdout).toMatch(/^200 /);
    expect(upstream.received).toHaveLength(1);
    expect(upstream.received[0]!.headers['x-api-key-id']).toBe(`id-${apiKey}`);
  });

  it('keygate_admitted_tokens_total counts the admitted requests by alg (refusals count nowhere there)', async () => {
    const before = await admitted();
    await call(await createToken({ apiKey: 'ed', privateKey: ED.privateKey }));
    await call(await createToken({ apiKey: 'es', privateKey: ES.privateKey }));
    await call(await createToken({ apiKey: 'es', privateKey: ES.privateKey }));
    await call(signWithKey(ED_HEADER, claims('ed'), OTHER_ED.privateKey));
    const after = await admitted();
    expect({
      EdDSA: after.EdDSA - before.EdDSA,
      ES256: after.ES256 - before.ES256,
      HS256: after.HS256 - before.HS256,
    }).toEqual({
      EdDSA: 1,
      ES256: 2,
      HS256: 0,
    });
  });

  async function admitted(): Promise<Record<'HS256' | 'EdDSA' | 'ES256', number>> {
    const text = (await send(gate.adminUrl, '/metrics')).body;
    const value = (alg: string) =>
      Number(new RegExp(`^keygate_admitted_tokens_total\\{alg="${alg}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
    return { HS256: value('HS256'), EdDSA: value('EdDSA'), ES256: value('ES256') };
  }

  it.each(CONFUSION)('%s → 401 40106, nothing forwarded', async (_name, make) => {
    const r = await call(make());
    expect([r.status, r.json()]).toEqual([401, { code: 40106, message: 'Invalid Token' }]);
    expect(upstream.received).toEqual([]);
    expect(upstream.wire()).toBe('');
  });
});
