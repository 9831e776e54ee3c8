import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './free-port.js';

export interface TestRedis {
  readonly url: string;
  readonly port: number;
  /** True when this helper owns the process (and can kill/pause it). */
  readonly owned: boolean;
  kill(): Promise<void>;
  start(): Promise<void>;
  pause(): void;
  resume(): void;
  flush(): Promise<void>;
  stop(): Promise<void>;
}

export function redisServerAvailable(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

async function waitForPing(url: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    const c = new Redis(url, {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null,
    });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return;
    } catch (err) {
      lastError = err;
      c.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`redis at ${url} did not answer PING within ${timeoutMs} ms: ${String(lastError)}`);
}

async function flushdb(url: string): Promise<void> {
  const c = new Redis(url);
  await c.flushdb();
  c.disconnect();
}

/**
 * A real redis-server for one test file, on a free port, so fault tests can
 * kill, pause and restart it. With `shared: true` and KEYGATE_TEST_REDIS_URL
 * set, that server is used instead (no fault injection possible).
 * Fails loudly, never skips, when no Redis can be had.
 */
export async function startRedis(options: { shared?: boolean } = {}): Promise<TestRedis> {
  const external = process.env.KEYGATE_TEST_REDIS_URL;
  if (options.shared && external) {
    await waitForPing(external);
    const fail = () => {
      throw new Error('fault injection needs a redis-server started by the test; unset KEYGATE_TEST_REDIS_URL');
    };
    return {
      url: external,
      port: Number(new URL(external).port || 6379),
      owned: false,
      kill: async () => fail(),
      start: async () => fail(),
      pause: fail,
      resume: fail,
      flush: () => flushdb(external),
      stop: async () => {},
    };
  }
  if (!redisServerAvailable()) {
    throw new Error(
      'redis-server is not on PATH and KEYGATE_TEST_REDIS_URL is not set: the suite needs a real Redis. ' +
        'Install it (apt-get install -y redis-server) or point KEYGATE_TEST_REDIS_URL at one.',
    );
  }
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'keygate-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let proc: ChildProcess | undefined;
  const start = async () => {
    proc = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
      { stdio: 'ignore' },
    );
    await waitForPing(url);
  };
  const kill = async () => {
    const p = proc;
    proc = undefined;
    if (!p || p.exitCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await exited;
  };
  await start();
  return {
    url,
    port,
    owned: true,
    kill,
    start,
    pause: () => proc?.kill('SIGSTOP'),
    resume: () => proc?.kill('SIGCONT'),
    flush: () => flushdb(url),
    stop: async () => {
      proc?.kill('SIGCONT');
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
