import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { bearer, send } from '../helpers/http.js';
import { exchange, firstBody, statusOf } from '../helpers/raw-socket.js';
import { useGate } from '../helpers/gate.js';
import { KEYS, MAX, mint, ORDERS, POLICY, policyFile, raw, SECRET, sha } from '../helpers/binding.js';

/**
 * Issue 43: a token bound to its request (method, target, body), end to end through a real Keygate and a
 * recording upstream. Every refusal is checked twice: what the client got (status, code, the logged
 * reason) and what the upstream received (nothing). Attacks over raw sockets: test/adversarial/request-binding.test.ts.
 */
const run = promisify(execFile);

/** A python3 with PyJWT (Debian's python3-jwt), or a failure naming it. */
function pythonWithJwt(): string {
  for (const py of ['python3', '/usr/bin/python3'])
    if (spawnSync(py, ['-c', 'import jwt'], { stdio: 'ignore' }).status === 0) return py;
  throw new Error('no python3 with PyJWT: apt-get install -y python3-jwt');
}

describe('binding a token to its request (proxy mode)', () => {
  const kg = useGate({
    keys: KEYS,
    policy: POLICY,
    env: { KEYGATE_BOUND_BODY_MAX_BYTES: String(MAX) },
    resetUpstream: true,
  });

  /** The reason logged for the latest request that was refused. */
  const lastReason = () =>
    kg.gate.logs
      .map((l) => JSON.parse(l) as { reason?: string; msg?: string })
      .filter((l) => l.reason !== undefined)
      .at(-1)?.reason;

  /** Refused with 401 40106 and this reason; nothing reached the kg.upstream. */
  async function expectRefused(reply: { status: number; json(): unknown }, reason: string) {
    expect(reply.status).toBe(401);
    expect(reply.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    await expect.poll(lastReason).toBe(reason);
    expect(kg.upstream.received).toHaveLength(0);
  }

  it('a GET bound to its target passes, and the upstream gets that target', async () => {
    const target = `${ORDERS}?symbol=BTC&limit=10`;
    for (const key of ['open', 'strict']) {
      const reply = await send(kg.gate.url, target, {
        headers: bearer(await mint(key, { method: 'GET', path: target })),
      });
      expect(reply.status, key).toBe(200);
    }
    expect(kg.upstream.received.map((r) => [r.method, r.url])).toEqual([
      ['GET', target],
      ['GET', target],
    ]);
  });

  it('a plain contract token keeps working on a key without binding', async () => {
    const reply = await send(kg.gate.url, ORDERS, { headers: bearer(await mint('open')) });
    expect(reply.status).toBe(200);
    expect(kg.upstream.received).toHaveLength(1);
  });

  it('another query is refused binding_mismatch; the same token then passes on its own target (the nonce was not used)', async () => {
    const token = await mint('open', { method: 'GET', path: `${ORDERS}?symbol=BTC` });
    await expectRefused(
      await send(kg.gate.url, `${ORDERS}?symbol=ETH`, { headers: bearer(token) }),
      'binding_mismatch',
    );
    const own = await send(kg.gate.url, `${ORDERS}?symbol=BTC`, { headers: bearer(token) });
    expect(own.status).toBe(200);
    expect(kg.upstream.received.map((r) => r.url)).toEqual([`${ORDERS}?symbol=BTC`]);
  });

  it('another method is refused binding_mismatch', async () => {
    const token = await mint('strict', { method: 'GET', path: ORDERS });
    await expectRefused(
      await send(kg.gate.url, ORDERS, { method: 'DELETE', headers: bearer(token) }),
      'binding_mismatch',
    );
  });

  it('a present but wrong claim on a key without binding is refused binding_mismatch', async () => {
    const token = await mint('open', { method: 'GET', path: `${ORDERS}/1` });
    await expectRefused(await send(kg.gate.url, ORDERS, { headers: bearer(token) }), 'binding_mismatch');
  });

  it('a required key refuses a plain token, and a token without body_sha256 for a request with a body, as unbound', async () => {
    await expectRefused(await send(kg.gate.url, ORDERS, { headers: bearer(await mint('strict')) }), 'unbound');
    const token = await mint('strict', { method: 'POST', path: ORDERS });
    await expectRefused(
      await send(kg.gate.url, ORDERS, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: '{"qty":1}',
      }),
      'unbound',
    );
  });

  it('a bound body reaches the upstream byte for byte', async () => {
    // Every byte value, CR LF and NUL included: nothing is decoded or re-encoded on the way.
    const body = Buffer.from(Array.from({ length: 1024 }, (_, i) => (i * 7) % 256));
    const token = await mint('strict', { method: 'POST', path: ORDERS, body });
    const res = await exchange(
      kg.gate.port,
      raw('POST', ORDERS, token, ['Content-Type: application/octet-stream', `Content-Length: ${body.length}`], body),
    );
    expect(statusOf(res.text)).toBe(200);
    await expect.poll(() => kg.upstream.received[0]?.complete).toBe(true);
    const got = kg.upstream.received[0]!;
    expect(Buffer.from(got.body, 'latin1').equals(body)).toBe(true);
    expect(got.headers['content-length']).toBe(String(body.length));
  });

  it('a changed body is refused binding_mismatch with nothing forwarded; that nonce is spent', async () => {
    const token = await mint('strict', { method: 'POST', path: ORDERS, body: '{"qty":1}' });
    const changed = await exchange(
      kg.gate.port,
      raw('POST', ORDERS, token, ['Content-Length: 9', 'Connection: close'], '{"qty":9}'),
    );
    expect(statusOf(changed.text)).toBe(401);
    expect(firstBody(changed.text)).toEqual({ code: 40106, message: 'Invalid Token' });
    await expect.poll(lastReason).toBe('binding_mismatch');
    expect(kg.upstream.received).toHaveLength(0);
    expect(kg.upstream.wire()).toBe('');
    // Read only once admitted: the token was used by the changed request.
    const own = await exchange(
      kg.gate.port,
      raw('POST', ORDERS, token, ['Content-Length: 9', 'Connection: close'], '{"qty":1}'),
    );
    expect(statusOf(own.text)).toBe(401);
    await expect.poll(lastReason).toBe('replay');
    expect(kg.upstream.received).toHaveLength(0);
  });

  it('a replayed bound token is refused 40106 replay', async () => {
    const token = await mint('strict', { method: 'GET', path: ORDERS });
    expect((await send(kg.gate.url, ORDERS, { headers: bearer(token) })).status).toBe(200);
    await expectRefusedAfter(1, await send(kg.gate.url, ORDERS, { headers: bearer(token) }), 'replay');
  });

  /** As expectRefused, with `forwarded` requests already at the kg.upstream. */
  async function expectRefusedAfter(forwarded: number, reply: { status: number; json(): unknown }, reason: string) {
    expect(reply.status).toBe(401);
    expect(reply.json()).toEqual({ code: 40106, message: 'Invalid Token' });
    await expect.poll(lastReason).toBe(reason);
    expect(kg.upstream.received).toHaveLength(forwarded);
  }

  it('a body over KEYGATE_BOUND_BODY_MAX_BYTES is 413 41300, nothing forwarded, the connection closed', async () => {
    const body = Buffer.alloc(MAX + 1, 0x61);
    const token = await mint('strict', { method: 'POST', path: ORDERS, body });
    // Declared by Content-Length: refused before a byte of the body is read.
    const declared = await exchange(kg.gate.port, raw('POST', ORDERS, token, [`Content-Length: ${body.length}`], body));
    expect(statusOf(declared.text)).toBe(413);
    expect(firstBody(declared.text)).toEqual({ code: 41300, message: 'Payload too large' });
    expect(declared.closed).toBe(true);
    await expect.poll(lastReason).toBe('bound_body_too_large');
    // Chunked: found while reading.
    const token2 = await mint('strict', { method: 'POST', path: ORDERS, body });
    const chunks = `${(MAX / 2).toString(16)}\r\n${'a'.repeat(MAX / 2)}\r\n`.repeat(2) + `1\r\na\r\n0\r\n\r\n`;
    const chunked = await exchange(kg.gate.port, raw('POST', ORDERS, token2, ['Transfer-Encoding: chunked'], chunks));
    expect(statusOf(chunked.text)).toBe(413);
    expect(chunked.closed).toBe(true);
    expect(kg.upstream.received).toHaveLength(0);
    expect(kg.upstream.wire()).toBe('');
  });

  it('a body exactly at the bound passes', async () => {
    const body = Buffer.alloc(MAX, 0x62);
    const token = await mint('strict', { method: 'POST', path: ORDERS, body });
    const res = await exchange(kg.gate.port, raw('POST', ORDERS, token, [`Content-Length: ${MAX}`], body));
    expect(statusOf(res.text)).toBe(200);
    await expect.poll(() => kg.upstream.received[0]?.complete).toBe(true);
    expect(kg.upstream.received[0]!.body).toBe(body.toString('latin1'));
  });

  it('the PyJWT example (examples/python_bound_client.py) binds a GET with its query and a POST with its body', async () => {
    const py = pythonWithJwt();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-binding-py-'));
    const bodyFile = join(dir, 'order.json');
    const body = '{"symbol":"BTC","qty":"0.5"}\n';
    writeFileSync(bodyFile, body);
    const get = await run(py, [
      'examples/python_bound_client.py',
      'GET',
      `${kg.gate.url}${ORDERS}?symbol=BTC`,
      'strict',
      SECRET,
    ]);
    expect(get.stdout).toMatch(/^200 /);
    const post = await run(py, [
      'examples/python_bound_client.py',
      'post',
      `${kg.gate.url}${ORDERS}`,
      'strict',
      SECRET,
      bodyFile,
    ]);
    expect(post.stdout).toMatch(/^200 /);
    await expect.poll(() => kg.upstream.received[1]?.complete).toBe(true);
    expect(kg.upstream.received.map((r) => [r.method, r.url, r.body])).toEqual([
      ['GET', `${ORDERS}?symbol=BTC`, ''],
      ['POST', ORDERS, body],
    ]);
    expect(sha(kg.upstream.received[1]!.body)).toBe(sha(body));
  });

  it('a bodiless request may bind the empty digest; any other digest is a mismatch', async () => {
    const ok = await mint('strict', { method: 'GET', path: ORDERS, body: '' });
    expect((await send(kg.gate.url, ORDERS, { headers: bearer(ok) })).status).toBe(200);
    const token = await mint('strict', { method: 'GET', path: ORDERS, body: 'x' });
    await expectRefusedAfter(1, await send(kg.gate.url, ORDERS, { headers: bearer(token) }), 'binding_mismatch');
  });
});

describe('binding in forward-auth mode', () => {
  let gate: RunningKeygate;
  beforeAll(async () => {
    gate = await startKeygate({
      upstream: 'http://unused.invalid',
      keys: KEYS,
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: policyFile(POLICY) },
    });
  });
  afterAll(() => gate?.close());

  /** An nginx auth_request check describing the original request. */
  const check = (method: string, uri: string, token: string) =>
    send(gate.url, '/', {
      headers: { ...bearer(token), 'X-Original-Method': method, 'X-Original-URI': uri },
    });

  it('method and path bind against the request the proxy describes; body_sha256 is refused body_not_bindable', async () => {
    const target = `${ORDERS}?symbol=BTC`;
    expect((await check('GET', target, await mint('strict', { method: 'GET', path: target }))).status).toBe(200);
    expect((await check('GET', ORDERS, await mint('strict', { method: 'GET', path: target }))).status).toBe(401);
    const withBody = await check('POST', ORDERS, await mint('open', { method: 'POST', path: ORDERS, body: '{}' }));
    expect(withBody.status).toBe(401);
    const reasons = gate.logs.map((l) => (JSON.parse(l) as { reason?: string }).reason).filter(Boolean);
    expect(reasons).toEqual(['binding_mismatch', 'body_not_bindable']);
  });
});

describe('binding and the failed-authentication budget per IP (issue 42)', () => {
  const kg = useGate({ keys: KEYS, policy: `${POLICY}failedAuthLimit: { rate: 1/h, burst: 2 }\n` });

  it('a changed body (found after the admit) spends from the IP budget like every other 40106: two, then the IP is blocked', async () => {
    for (let i = 0; i < 2; i++) {
      const token = await mint('strict', { method: 'POST', path: ORDERS, body: '{"qty":1}' });
      const changed = await exchange(
        kg.gate.port,
        raw('POST', ORDERS, token, ['Content-Length: 9', 'Connection: close'], '{"qty":9}'),
      );
      expect(statusOf(changed.text)).toBe(401);
      expect(firstBody(changed.text)).toEqual({ code: 40106, message: 'Invalid Token' });
    }
    // The budget (burst 2) is spent: a good token from that IP is refused before any check.
    const good = await send(kg.gate.url, ORDERS, { headers: bearer(await mint('open')) });
    expect(good.status).toBe(429);
    expect(good.json()).toEqual({ code: 10429, message: 'Too Many Requests' });
    expect(kg.upstream.received).toHaveLength(0);
  });
});
