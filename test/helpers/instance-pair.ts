import type { KeyRecord } from '../../src/keys/key-record.js';
import { startKeygate, type RunningKeygate } from './keygate.js';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';
import { startRedis, type TestRedis } from './redis-server.js';

/** Two Keygate instances on one real Redis, before one recording upstream: replicas of one deployment. */
export interface InstancePair {
  readonly redis: TestRedis;
  readonly upstream: RecordingUpstream;
  /** Started with `keys`, which it writes to the shared Redis. */
  readonly a: RunningKeygate;
  /** Started after `a`, with no keys of its own: it sees only what is in Redis. */
  readonly b: RunningKeygate;
  /** Thaws a frozen Redis first, so every close is answered. */
  close(): Promise<void>;
}

export async function startInstancePair(options: {
  keys: readonly KeyRecord[];
  env: Record<string, string>;
  /** The Redis's persistence (redis-server.ts): 'aof' by default. */
  persistence?: 'aof' | 'none';
}): Promise<InstancePair> {
  const redis = await startRedis(options.persistence ? { persistence: options.persistence } : {});
  const upstream = await startRecordingUpstream();
  const common = { upstream: upstream.url, redisUrl: redis.url, env: options.env };
  const a = await startKeygate({ ...common, keys: [...options.keys] });
  const b = await startKeygate(common);
  return {
    redis,
    upstream,
    a,
    b,
    async close() {
      redis.resume();
      await a.close();
      await b.close();
      await upstream.close();
      await redis.stop();
    },
  };
}
