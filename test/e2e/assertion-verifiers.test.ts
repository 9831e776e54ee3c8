import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAssertionVerifier } from '../../src/client/verify-assertion.js';
import { newAssertionKey } from '../../src/assertion/assertion-keys.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { bearer, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { ACCOUNTS_PATH } from '../helpers/constants.js';

const run = promisify(execFile);
const ROOT = new URL('../..', import.meta.url).pathname;
const SECRET = 'verifier-secret-0123456789abcdef';
const AUDIENCE = 'accounts-service';

/** A python3 with PyJWT (Debian's python3-jwt), or a failure naming it. */
async function python(): Promise<string> {
  for (const py of ['python3', '/usr/bin/python3'])
    if (
      await run(py, ['-c', 'import jwt, cryptography'], { timeout: 30_000 }).then(
        () => true,
        () => false,
      )
    )
      return py;
  throw new Error('no python3 with PyJWT and cryptography: apt-get install -y python3-jwt python3-cryptography');
}
const outcome = (cmd: string, args: string[]) =>
  run(cmd, args, { cwd: ROOT, timeout: 30_000 }).then(
    ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

/** Keygate (request mode, so the examples' htm/htu check runs too) and the assertions its upstream received. */
describe('the shipped verifiers accept what Keygate sends and refuse the rest', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let jwksUrl: string;
  let identity: string;
  let bound: string;
  const target = `${ACCOUNTS_PATH}?page=2`;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-verifiers-'));
    const keys = (name: string, alg: 'EdDSA' | 'ES256') => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify({ keys: [newAssertionKey(alg, name)] }));
      chmodSync(file, 0o600);
      return file;
    };
    const key = makeKey({ apiKey: 'svc', secret: SECRET, id: 'key-svc', owner: 'acct-1' });
    // Two Keygates sharing nothing but the audience: one per mode, each with its own key.
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [key],
      env: { KEYGATE_ASSERTION_KEYS_FILE: keys('es', 'ES256'), KEYGATE_ASSERTION_AUDIENCE: AUDIENCE },
    });
    const requestGate = await startKeygate({
      upstream: upstream.url,
      keys: [key],
      env: {
        KEYGATE_ASSERTION_KEYS_FILE: keys('ed', 'EdDSA'),
        KEYGATE_ASSERTION_AUDIENCE: AUDIENCE,
        KEYGATE_ASSERTION_MODE: 'request',
      },
    });
    try {
      expect((await send(gate.url, target, { headers: bearer(token('svc', SECRET)) })).status).toBe(200);
      expect((await send(requestGate.url, target, { headers: bearer(token('svc', SECRET)) })).status).toBe(200);
    } finally {
      await requestGate.close();
    }
    [identity, bound] = upstream.received.map((r) => r.headers['x-keygate-assertion'] as string) as [string, string];
    jwksUrl = `${gate.adminUrl}/.well-known/jwks.json`;
    // The request-mode Keygate is gone: its key is published by nobody. Verify `bound` against a local set instead.
  });
  afterAll(async () => {
    await gate.close();
    await upstream.close();
  });

  it('keygate/verify with the JWKS URL of the admin port', async () => {
    const verify = createAssertionVerifier({ jwks: jwksUrl, audience: AUDIENCE });
    expect(await verify(identity)).toMatchObject({ keyId: 'key-svc', owner: 'acct-1', scopes: ['accounts:read'] });
    await expect(createAssertionVerifier({ jwks: jwksUrl, audience: 'billing' })(identity)).rejects.toMatchObject({
      code: 'wrong_audience',
    });
    // Signed by a key this Keygate does not publish.
    await expect(verify(bound, { method: 'GET', target })).rejects.toMatchObject({ code: 'unknown_kid' });
  });

  it('is importable as keygate/verify from the package (check:deps holds client/ to importing nothing of the server)', async () => {
    const script = `import('keygate/verify').then(async (m) => {
      const v = m.createAssertionVerifier({ jwks: process.argv[1], audience: ${JSON.stringify(AUDIENCE)} });
      const id = await v(process.argv[2]);
      console.log(JSON.stringify({ keyId: id.keyId, kid: id.kid }));
    })`;
    const { stdout } = await run(process.execPath, ['-e', script, jwksUrl, identity], { cwd: ROOT, timeout: 30_000 });
    expect(JSON.parse(stdout)).toEqual({ keyId: 'key-svc', kid: 'es' });
  });

  it.each([
    ['Node (jose createRemoteJWKSet)', async () => process.execPath, 'examples/verify-assertion.mjs'],
    ['Python (PyJWT PyJWKClient)', python, 'examples/verify_assertion.py'],
  ])('%s example: verifies, and refuses a wrong audience and a replay elsewhere', async (_name, cmd, file) => {
    const exe = await cmd();
    const good = await outcome(exe, [file, jwksUrl, AUDIENCE, identity]);
    expect(good.code).toBe(0);
    expect(JSON.parse(good.stdout)).toMatchObject({
      iss: 'keygate',
      aud: AUDIENCE,
      sub: 'key-svc',
      owner: 'acct-1',
      scope: 'accounts:read',
    });
    const wrongAudience = await outcome(exe, [file, jwksUrl, 'billing', identity]);
    expect(wrongAudience.code).toBe(1);
    expect(wrongAudience.stderr).toMatch(/^refused: /);
    const tampered = identity.replace(/\.([^.]+)\./, (_m, p: string) => {
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
      return `.${Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url')}.`;
    });
    expect((await outcome(exe, [file, jwksUrl, AUDIENCE, tampered])).code).toBe(1);
    // A request-bound assertion from the other Keygate: its kid is not published here.
    expect((await outcome(exe, [file, jwksUrl, AUDIENCE, bound, 'GET', target])).code).toBe(1);
  });
});
