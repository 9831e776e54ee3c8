import {
  flushRedis,
  redisServerAvailable,
  startRedisServer,
  waitForRedis,
} from '../../scripts/harness/redis-server.mjs';

export { redisServerAvailable } from '../../scripts/harness/redis-server.mjs';

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

/**
 * A real redis-server for one test file, on a free port (scripts/harness/redis-server.mjs, shared with
 * the benchmark and soak scripts), with AOF on unless `persistence: 'none'` (a test of what a restart
 * without persistence forgets); `args`: more redis-server options. Fault tests can kill, pause and
 * restart it. With `shared: true`
 * and KEYGATE_TEST_REDIS_URL set, that server is used instead (no fault injection possible).
 * Fails loudly, never skips, when no Redis can be had.
 */
export async function startRedis(
  options: { shared?: boolean; persistence?: 'aof' | 'none'; args?: string[] } = {},
): Promise<TestRedis> {
  const external = process.env.KEYGATE_TEST_REDIS_URL;
  if (options.shared && external) {
    await waitForRedis(external);
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
      flush: () => flushRedis(external),
      stop: async () => {},
    };
  }
  if (!redisServerAvailable()) {
    throw new Error(
      'redis-server is not on PATH and KEYGATE_TEST_REDIS_URL is not set: the suite needs a real Redis. ' +
        'Install it (apt-get install -y redis-server) or point KEYGATE_TEST_REDIS_URL at one.',
    );
  }
  const server = await startRedisServer({
    ...(options.persistence && { persistence: options.persistence }),
    ...(options.args && { args: options.args }),
  });
  return { ...server, owned: true, flush: () => flushRedis(server.url) };
}
