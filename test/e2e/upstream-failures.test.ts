import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { UPSTREAM_FAILURE_LOG_INTERVAL_MS } from '../../src/gateway/upstream/upstream-failure-log.js';
import { freePort } from '../helpers/free-port.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';

/**
 * Issue 35 item 2: a wrong KEYGATE_UPSTREAM (nothing listening, a name that does not resolve, https:// to a
 * plain-HTTP port) against real sockets. Clients get 502 50200; the cause is logged at warn once per cause
 * per interval with the count of the lines held back, is on every request line, and is counted by cause.
 */
const dir = mkdtempSync(join(tmpdir(), 'keygate-upstream-failures-'));
const POLICY = join(dir, 'policy.yaml');
writeFileSync(POLICY, 'routes: []\npublic:\n  - { method: GET, path: /status }\n');

let plain: Server;
let plainPort = 0;
beforeAll(async () => {
  plain = createServer((_req, res) => res.end('plain http'));
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
  plainPort = (plain.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => plain.close(() => r())));

interface Line {
  level: number;
  msg: string;
  [field: string]: unknown;
}
const lines = (gate: RunningKeygate): Line[] => gate.logs.map((l) => JSON.parse(l) as Line);
const failures = (gate: RunningKeygate) => lines(gate).filter((l) => l.msg === 'upstream request failed');

async function counter(gate: RunningKeygate, cause: string): Promise<number> {
  const text = await (await fetch(`${gate.adminUrl}/metrics`)).text();
  const m = new RegExp(`^keygate_upstream_errors_total\\{cause="${cause}"\\} (\\d+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

describe('upstream failures: the cause at warn, rate-limited, and counted by cause', () => {
  const cases = [
    {
      name: 'nothing listens on the port',
      cause: 'refused',
      upstream: async () => `http://127.0.0.1:${await freePort()}`,
      err: /ECONNREFUSED/,
    },
    {
      name: 'the host name does not resolve',
      cause: 'dns',
      upstream: async () => 'http://keygate-no-such-upstream.invalid',
      err: /keygate-no-such-upstream\.invalid/,
    },
    {
      name: 'https:// to a plain-HTTP port (wrong scheme)',
      cause: 'tls',
      upstream: async () => `https://127.0.0.1:${plainPort}`,
      err: /./,
    },
  ];

  it.each(cases)('$name: cause $cause', async ({ cause, upstream, err }) => {
    const clock = manualClock();
    const gate = await startKeygate({ upstream: await upstream(), clock, env: { KEYGATE_CONFIG: POLICY } });
    try {
      const get = async () => {
        const res = await fetch(`${gate.url}/status`);
        expect([res.status, await res.json()]).toEqual([502, { code: 50200, message: 'Bad gateway' }]);
      };
      for (let i = 0; i < 5; i++) await get();
      // One warn line for five failures, naming the cause in the error's own words, and what to check.
      const first = failures(gate);
      expect(first).toHaveLength(1);
      expect(first[0]).toMatchObject({
        level: 40,
        cause,
        suppressed: 0,
        upstream: expect.any(String),
        check: expect.any(String),
      });
      expect(String(first[0]!.err)).toMatch(err);
      // Every request line carries the cause; the counter has every failure.
      const requests = lines(gate).filter((l) => l.msg === 'request');
      expect(requests.map((l) => [l.status, l.reason, l.upstreamCause])).toEqual(
        Array.from({ length: 5 }, () => [502, 'upstream_error', cause]),
      );
      expect(await counter(gate, cause)).toBe(5);

      // Within the interval: still one line. Past it: the next failure is logged with the four held back.
      clock.advance(UPSTREAM_FAILURE_LOG_INTERVAL_MS - 1);
      await get();
      expect(failures(gate)).toHaveLength(1);
      clock.advance(1);
      await get();
      const after = failures(gate);
      expect(after).toHaveLength(2);
      expect(after[1]).toMatchObject({ level: 40, cause, suppressed: 5 });
      expect(await counter(gate, cause)).toBe(7);
    } finally {
      await gate.close();
    }
  });
});
