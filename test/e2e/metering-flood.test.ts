import { mkdtempSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send, type Reply } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { token } from '../helpers/tokens.js';

const SECRET = 'flood-secret-0123456789abcdef';
const FORGED = 'not-the-secret-0123456789abcdef';
const PUBLIC_PATH = '/api/v3/asset_pairs';
const ATTACKER = '127.0.0.61';
const BYSTANDER = '127.0.0.62';
const FLOOD = 40;

/** The request lines and summaries Keygate wrote, parsed. */
const lines = (gate: RunningKeygate) =>
  gate.logs
    .flatMap((chunk) => chunk.split('\n'))
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const metric = (body: string, name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(body)?.[1] ?? NaN);

/**
 * Issue 42, a flood of forged tokens from one IP once its failed-authentication budget is spent: every
 * request from that IP is answered 429 ip_blocked before its target, route or token is looked at (a
 * public route, the time endpoint and a valid token too), nothing reaches the upstream, and the log
 * holds one request line for the first refusal and a summary with the count of the rest (written at the
 * latest when Keygate stops), while the metrics count every one.
 */
describe('a flood from a blocked IP', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  let closed = false;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-flood-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: [GET, POST], path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        'public:',
        `  - { method: GET, path: ${PUBLIC_PATH} }`,
        'failedAuthLimit: { rate: 1/h, burst: 3 }',
        '',
      ].join('\n'),
    );
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'good', secret: SECRET, scopes: ['accounts:read'] })],
      env: { KEYGATE_CONFIG: policy, KEYGATE_LOG_LEVEL: 'info' },
    });
  });
  afterAll(async () => {
    if (!closed) await gate?.close();
    await upstream?.close();
  });

  const expectBlocked = (r: Reply) => {
    expect(r.status).toBe(429);
    expect(r.json()).toEqual({ code: 10429, message: 'Too Many Requests' });
    expect(r.headers['content-type']).toBe('application/json');
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.headers['x-request-id']).toMatch(/./);
    const retryAfter = Number(r.headers['retry-after']);
    // One failure back per hour: blocked for about an hour (less the seconds the test has taken).
    expect(retryAfter).toBeGreaterThan(3_500);
    expect(retryAfter).toBeLessThanOrEqual(3_600);
    expect(r.headers['ratelimit-policy']).toBe('"keygate-ip";q=3;w=10800');
    // t counts until the whole burst is back: the first failure back, then the other two, an hour each.
    expect(r.headers.ratelimit).toBe(`"keygate-ip";r=0;t=${retryAfter + 7_200}`);
  };

  it('after the budget is spent, every request from the IP is refused before anything else, and nothing is forwarded', async () => {
    for (let i = 0; i < 3; i++) {
      const r = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', FORGED)), from: ATTACKER });
      expect(r.status).toBe(401);
    }
    expect(upstream.received).toHaveLength(0);
    // Keep-alive: a bodiless refusal leaves the connection open for the next request.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const requests: Array<() => Promise<Reply>> = [
      () => send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', FORGED)), from: ATTACKER, agent }),
      () => send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)), from: ATTACKER, agent }),
      () => send(gate.url, PUBLIC_PATH, { from: ATTACKER, agent }),
      () => send(gate.url, '/api/v3/time', { from: ATTACKER, agent }),
      () => send(gate.url, '/nowhere/../at-all', { from: ATTACKER, agent }),
    ];
    for (let i = 0; i < FLOOD - 1; i++) {
      const r = await (requests[i % requests.length] as () => Promise<Reply>)();
      expectBlocked(r);
      expect(r.headers.connection).not.toBe('close');
    }
    agent.destroy();
    // A body still on its way: refused the same, and the connection closed rather than read.
    const withBody = await send(gate.url, ACCOUNTS_PATH, {
      method: 'POST',
      headers: { ...bearer(token('good', SECRET)), 'content-type': 'application/json' },
      body: '{"a":1}',
      from: ATTACKER,
    });
    expectBlocked(withBody);
    expect(withBody.headers.connection).toBe('close');
    expect(upstream.received).toHaveLength(0);
    // Another IP is not affected.
    const other = await send(gate.url, ACCOUNTS_PATH, { headers: bearer(token('good', SECRET)), from: BYSTANDER });
    expect(other.status).toBe(200);
    expect(upstream.received).toHaveLength(1);
    expect(upstream.received[0]?.headers['x-api-key-id']).toBe('id-good');
  });

  it('counts every refusal in the metrics; logs the first in full and the rest in a summary, so each is accounted for', async () => {
    const metrics = (await send(gate.adminUrl, '/metrics')).body;
    expect(metric(metrics, 'keygate_auth_rejections_total\\{code="10429",reason="ip_blocked"\\}')).toBe(FLOOD);
    const full = () =>
      lines(gate).filter((l) => l.msg === 'request' && l.reason === 'ip_blocked' && l.clientIp === ATTACKER);
    expect(full()).toHaveLength(1);
    expect(full()[0]).toMatchObject({ code: 10429, status: 429, method: 'GET' });
    await gate.close();
    closed = true;
    const summaries = lines(gate).filter((l) => l.msg === 'blocked requests');
    expect(summaries.length).toBeGreaterThanOrEqual(1);
    for (const s of summaries)
      expect(s).toMatchObject({ clientIp: ATTACKER, code: 10429, reason: 'ip_blocked', status: 429 });
    expect(full().length + summaries.reduce((n, s) => n + Number(s.refused), 0)).toBe(FLOOD);
    // The three failures that spent the budget were logged one by one, as ever.
    expect(lines(gate).filter((l) => l.msg === 'request' && l.status === 401 && l.clientIp === ATTACKER)).toHaveLength(
      3,
    );
  });
});

describe('a blocked IP behind a trusted proxy', () => {
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  const PROXY = '127.0.0.71';

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-flood-xff-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `trustedProxies: [${PROXY}/32]`,
        'failedAuthLimit: { rate: 1/h, burst: 2 }',
        '',
      ].join('\n'),
    );
    upstream = await startRecordingUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'good', secret: SECRET, scopes: ['accounts:read'] })],
      env: { KEYGATE_CONFIG: policy },
    });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
  });

  const via = (client: string, secret: string) =>
    send(gate.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token('good', secret)), 'x-forwarded-for': client },
      from: PROXY,
    });

  it('is the first untrusted X-Forwarded-For hop: that client is blocked, another behind the same proxy is not', async () => {
    expect((await via('198.51.100.7', FORGED)).status).toBe(401);
    expect((await via('198.51.100.7', FORGED)).status).toBe(401);
    const blocked = await via('198.51.100.7', SECRET);
    expect(blocked.status).toBe(429);
    expect(blocked.json()).toMatchObject({ code: 10429 });
    expect((await via('198.51.100.8', SECRET)).status).toBe(200);
    expect(upstream.received).toHaveLength(1);
    const line = gate.logs.find((l) => l.includes('"reason":"ip_blocked"'));
    expect(line).toContain('"clientIp":"198.51.100.7"');
  });
});

describe('a blocked IP in forward-auth mode (nginx auth_request)', () => {
  let gate: RunningKeygate;
  const NGINX = '127.0.0.81';

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-flood-fa-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `trustedProxies: [${NGINX}/32]`,
        'failedAuthLimit: { rate: 1/h, burst: 2 }',
        '',
      ].join('\n'),
    );
    gate = await startKeygate({
      upstream: 'http://unused.invalid',
      keys: [makeKey({ apiKey: 'good', secret: SECRET, scopes: ['accounts:read'] })],
      env: { KEYGATE_MODE: 'forward-auth', KEYGATE_CONFIG: policy },
    });
  });
  afterAll(async () => {
    await gate?.close();
  });

  const check = (client: string, secret: string, extra: Record<string, string> = {}) =>
    send(gate.url, '/', {
      headers: {
        ...bearer(token('good', secret)),
        'x-original-method': 'GET',
        'x-original-uri': ACCOUNTS_PATH,
        'x-forwarded-for': client,
        ...extra,
      },
      from: NGINX,
    });

  it('the check is refused as any request is, and a forced status carries the code for the render step', async () => {
    expect((await check('198.51.100.9', FORGED)).status).toBe(401);
    expect((await check('198.51.100.9', FORGED)).status).toBe(401);
    const plain = await check('198.51.100.9', SECRET);
    expect(plain.status).toBe(429);
    expect(plain.json()).toMatchObject({ code: 10429 });
    expect(Number(plain.headers['retry-after'])).toBeGreaterThan(3_500);
    expect(plain.headers['ratelimit-policy']).toBe('"keygate-ip";q=2;w=7200');
    const forced = await check('198.51.100.9', SECRET, { 'x-keygate-refusal-status': '403' });
    expect([forced.status, forced.headers['x-keygate-code']]).toEqual([403, '10429']);
    const other = await check('198.51.100.10', SECRET);
    expect([other.status, other.headers['x-api-key-id']]).toEqual([200, 'id-good']);
  });
});
