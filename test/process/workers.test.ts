import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { runKeygate, serveKeygate, spawnKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { guard } from '../helpers/slowdown.js';
import {
  openStream,
  refusalOf,
  startWsUpstream,
  STREAM_SCOPE,
  writeStreamPolicy,
  type ClientStream,
} from '../helpers/ws-streams.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** KEYGATE_WORKERS through the real CLI: `keygate serve` forks workers that share the port (node:cluster). */
describe('KEYGATE_WORKERS', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream;
  let key: { apiKey: string; apiSecret: string };

  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    upstream = await startRecordingUpstream();
    upstream.handler = (req, res) => {
      const reply = () => {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true }));
      };
      if (req.url?.includes('slow=1')) setTimeout(reply, 1_500);
      else reply();
    };
    const { stdout } = await runKeygate(['keys', 'create', '--scopes', 'accounts:read', '--json'], {
      KEYGATE_REDIS_URL: redis.url,
    });
    key = JSON.parse(stdout) as { apiKey: string; apiSecret: string };
  });
  afterAll(async () => {
    await upstream?.close();
    await redis?.stop();
  });

  it('the embedded store refuses more than one worker, at start', async () => {
    const s = spawnKeygate(['serve'], {
      env: { KEYGATE_REDIS_URL: '', KEYGATE_UPSTREAM: upstream.url, KEYGATE_WORKERS: '2' },
    });
    expect((await s.exited).code).toBe(1);
    expect(s.stderr()).toMatch(/KEYGATE_WORKERS: 2 workers need Redis/);
  });

  it(
    'two workers share the port and Redis; metrics are summed; SIGTERM drains every worker and exits 0',
    async () => {
      const s = await serveKeygate({
        KEYGATE_UPSTREAM: upstream.url,
        KEYGATE_REDIS_URL: redis.url,
        KEYGATE_WORKERS: '2',
        KEYGATE_LOG_LEVEL: 'info',
      });
      const { port, adminPort } = s;
      try {
        await expect.poll(() => s.lines().some((l) => l.msg === 'keygate started'), { timeout: 15_000 }).toBe(true);
        const started = s.lines().find((l) => l.msg === 'keygate started')!;
        const primaryPid = s.child.pid!;
        const workerPids = started.workers as number[];
        expect(workerPids).toHaveLength(2);
        expect(started).toMatchObject({ port, adminPort, pid: primaryPid });
        const url = `http://127.0.0.1:${port}`;
        const admin = `http://127.0.0.1:${adminPort}`;

        // Each request opens a new connection; the primary hands them out round-robin.
        let ok = 0;
        for (let i = 0; i < 20; i++) {
          expect((await send(url, ACCOUNTS_PATH, { headers: bearer(token(key.apiKey, key.apiSecret)) })).status).toBe(
            200,
          );
          ok++;
        }
        // Request lines reach stdout in batches (at most 100 ms late): poll for them.
        const servedBy = () =>
          [
            ...new Set(
              s
                .lines()
                .filter((l) => l.msg === 'request' && l.status === 200)
                .map((l) => l.pid as number),
            ),
          ].sort();
        await expect.poll(servedBy).toEqual([...workerPids].sort());

        // The replay guard is shared through Redis: a replay is refused whichever worker gets it.
        const pidOf = (requestId: string) =>
          s.lines().find((l) => l.msg === 'request' && l.requestId === requestId)?.pid;
        const crossWorker: boolean[] = [];
        for (let i = 0; i < 4; i++) {
          const t = token(key.apiKey, key.apiSecret);
          expect(
            (await send(url, ACCOUNTS_PATH, { headers: { ...bearer(t), 'x-request-id': `first-${i}` } })).status,
          ).toBe(200);
          ok++;
          expect(
            (await send(url, ACCOUNTS_PATH, { headers: { ...bearer(t), 'x-request-id': `again-${i}` } })).json(),
          ).toEqual({ code: 40106, message: 'Invalid Token' });
          await expect.poll(() => pidOf(`again-${i}`) !== undefined && pidOf(`first-${i}`) !== undefined).toBe(true);
          crossWorker.push(pidOf(`first-${i}`) !== pidOf(`again-${i}`));
        }
        expect(crossWorker).toContain(true);

        // The admin port (primary) sums the workers' registries and asks each worker for readiness.
        const metrics = (await send(admin, '/metrics')).body;
        expect(metrics).toContain(`keygate_requests_total{code="ok"} ${ok}`);
        expect(metrics).toContain('keygate_auth_rejections_total{code="40106",reason="replay"} 4');
        expect(metrics).toContain('keygate_redis_up 1');
        // Every worker reports the same build: the primary keeps 1, not the sum.
        expect(metrics).toMatch(/^keygate_build_info\{version="[^"]+",node_version="v[^"]+"\} 1$/m);
        expect((await send(admin, '/readyz')).json()).toEqual({ status: 'ready' });
        expect((await send(admin, '/healthz')).status).toBe(200);

        // A worker that dies is replaced.
        process.kill(workerPids[0]!, 'SIGKILL');
        await expect
          .poll(() => s.lines().filter((l) => l.msg === 'worker died; starting a replacement').length, {
            timeout: 5_000,
          })
          .toBe(1);
        await expect
          .poll(async () => (await send(admin, '/readyz')).status, { timeout: 10_000, interval: 100 })
          .toBe(200);
        for (let i = 0; i < 6; i++)
          expect((await send(url, ACCOUNTS_PATH, { headers: bearer(token(key.apiKey, key.apiSecret)) })).status).toBe(
            200,
          );
        await expect.poll(() => servedBy().some((pid) => !workerPids.includes(pid))).toBe(true); // the replacement served some
        const replacement = servedBy().find((pid) => !workerPids.includes(pid));

        // Graceful shutdown: in-flight requests on both workers finish, then everything exits 0.
        const slow = [0, 1].map(() =>
          send(url, `${ACCOUNTS_PATH}?slow=1`, { headers: bearer(token(key.apiKey, key.apiSecret)) }),
        );
        await new Promise((r) => setTimeout(r, 300));
        const stopAt = Date.now();
        s.child.kill('SIGTERM');
        expect((await Promise.all(slow)).map((r) => r.status)).toEqual([200, 200]);
        expect((await s.exited).code).toBe(0);
        const tookMs = Date.now() - stopAt;
        expect(tookMs).toBeGreaterThan(800);
        expect(s.lines().filter((l) => l.msg === 'worker stopped')).toHaveLength(2);
        expect(s.lines().at(-1)).toMatchObject({ msg: 'keygate stopped', clean: true });
        for (const pid of [workerPids[1]!, replacement!]) expect(alive(pid)).toBe(false);
      } finally {
        if (s.child.exitCode === null) s.child.kill('SIGKILL');
      }
    },
    guard(60_000),
  );

  it(
    'an empty store is warned about once, by the primary, as a single process does (not by every worker, nor never)',
    async () => {
      const empty = await startRedis();
      const s = await serveKeygate({
        KEYGATE_UPSTREAM: upstream.url,
        KEYGATE_REDIS_URL: empty.url,
        KEYGATE_WORKERS: '2',
        KEYGATE_LOG_LEVEL: 'info',
      });
      try {
        const started = await s.line('keygate started', 15_000);
        const warned = await s.line((l) => String(l.msg).includes('holds no keys'), 15_000);
        expect(warned).toMatchObject({
          level: 40,
          keys: 0,
          readyRequiresKeys: false,
          store: empty.url,
          pid: started.pid,
        });
        // Every line is in once the process has exited: one warning, however many workers.
        expect((await s.stop()).code).toBe(0);
        expect(s.lines().filter((l) => String(l.msg).includes('holds no keys'))).toHaveLength(1);
      } finally {
        await s.stop();
        await empty.stop();
      }
    },
    guard(60_000),
  );

  it(
    'KEYGATE_MAX_STREAMS_PER_KEY counts per instance: with 2 workers and a limit of 2, one key holds 2 streams, not 4',
    async () => {
      const wsUpstream = await startWsUpstream();
      const { stdout } = await runKeygate(['keys', 'create', '--scopes', STREAM_SCOPE, '--json'], {
        KEYGATE_REDIS_URL: redis.url,
      });
      const streamer = JSON.parse(stdout) as { apiKey: string; apiSecret: string };
      const s = await serveKeygate({
        KEYGATE_UPSTREAM: wsUpstream.url,
        KEYGATE_REDIS_URL: redis.url,
        KEYGATE_CONFIG: writeStreamPolicy(),
        KEYGATE_WORKERS: '2',
        KEYGATE_MAX_STREAMS_PER_KEY: '2',
      });
      const open: ClientStream[] = [];
      try {
        await s.line('keygate started', 15_000);
        // Each stream is a new connection: the primary hands them to the workers in turn.
        const refused: Array<{ status: number; code: number }> = [];
        for (let i = 0; i < 4; i++) {
          const attempt = openStream(s.url, streamer.apiKey, streamer.apiSecret);
          try {
            open.push(await attempt);
          } catch {
            refused.push(await refusalOf(attempt));
          }
        }
        expect(open).toHaveLength(2);
        expect(refused).toEqual([
          { status: 429, code: 10429 },
          { status: 429, code: 10429 },
        ]);
        // A stream that ends gives its place back, to whichever worker asks next.
        const first = open.shift() as ClientStream;
        first.ws.close(1000);
        await first.closed;
        await expect
          .poll(async () => {
            const attempt = openStream(s.url, streamer.apiKey, streamer.apiSecret);
            try {
              open.push(await attempt);
              return true;
            } catch {
              await refusalOf(attempt);
              return false;
            }
          })
          .toBe(true);
        expect(open).toHaveLength(2);
      } finally {
        for (const o of open) o.ws.terminate();
        await s.stop();
        await wsUpstream.close();
      }
    },
    guard(60_000),
  );
});
