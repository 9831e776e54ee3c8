import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { exchange } from '../helpers/raw-socket.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';

const SECRET = 'pipelined-secret-0123456789abcdef';
const BURST = 20; // docs/keys.md's example: 20 failures, then 10 a minute
const GUESSES = 400;
const REAL_AT = 300; // the one right guess, far past the budget

/**
 * The failed-authentication budget bounds answers, not starts: a client that pipelines guesses on one
 * keep-alive connection has them all parsed (and their authentication started) before the first spend is
 * made. Each guess is answered by the spend that decides it, and a right guess parsed among them waits for
 * the spends of the guesses parsed before it: past the budget, every answer is 429 ip_blocked.
 */
describe.each([
  ['memory store', false],
  ['Redis store', true],
])('the failed-authentication budget bounds pipelined guesses (%s)', (_label, withRedis) => {
  let redis: TestRedis | undefined;
  let upstream: RecordingUpstream;
  let gate: RunningKeygate;
  beforeAll(async () => {
    if (withRedis) redis = await startRedis();
    upstream = await startRecordingUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-ip-pipelining-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read] }`,
        `failedAuthLimit: { rate: 10/m, burst: ${BURST} }`,
        '',
      ].join('\n'),
    );
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'real', secret: SECRET })],
      ...(redis && { redisUrl: redis.url }),
      env: { KEYGATE_CONFIG: policy },
    });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });

  it('within the budget, a right guess pipelined behind wrong ones passes once their spends are made', async () => {
    const requests = Array.from({ length: 6 }, (_, i) => {
      const t = i === 3 ? token('real', SECRET) : token(`first-${i}`, 'forged-secret-0123456789abcdef');
      return `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t}\r\n\r\n`;
    });
    const answer = await exchange(gate.port, requests.join(''), { quietMs: 500, maxMs: guard(20_000) });
    expect(answer.statuses).toEqual([404, 404, 404, 200, 404, 404]);
    expect(upstream.received).toHaveLength(1);
    upstream.reset();
  });

  it(`${GUESSES} forged tokens pipelined on one connection: at most ${BURST} answers besides 429, the right guess among the refused`, async () => {
    const requests = Array.from({ length: GUESSES }, (_, i) => {
      const t = i === REAL_AT ? token('real', SECRET) : token(`guess-${i}`, 'forged-secret-0123456789abcdef');
      return `GET ${ACCOUNTS_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t}\r\n\r\n`;
    });
    const answer = await exchange(gate.port, requests.join(''), { quietMs: 1_000, maxMs: guard(60_000) });
    expect(answer.statuses).toHaveLength(GUESSES);
    const notBlocked = answer.statuses.filter((s) => s !== 429);
    console.log(
      `[limits] ${_label}: ${GUESSES} pipelined guesses, ${notBlocked.length} answered besides 429 (burst ${BURST})`,
    );
    expect(notBlocked.length).toBeLessThanOrEqual(BURST);
    expect(new Set(notBlocked)).toEqual(new Set([404])); // 10013: sub names no key
    expect(answer.statuses[REAL_AT]).toBe(429);
    expect(upstream.received).toHaveLength(0);
  });
});
