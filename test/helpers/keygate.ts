import { Writable } from 'node:stream';
import pino from 'pino';
import type { Clock } from '../../src/clock.js';
import { loadConfig, type Config } from '../../src/config/load-config.js';
import { createKeygate, type Keygate } from '../../src/create-keygate.js';
import { REDACT_PATHS } from '../../src/observe/logger.js';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { createMemoryStore } from '../../src/store/memory/memory-store.js';
import { StoreUnavailableError, type Store } from '../../src/store/store.js';
import { guard } from './slowdown.js';
import { systemClock } from '../../src/clock.js';
import { waitStoreReady } from '../../src/store/wait-ready.js';

export interface RunningKeygate {
  readonly url: string;
  readonly adminUrl: string;
  /** Set when KEYGATE_MANAGEMENT_PORT is. */
  readonly managementUrl: string | undefined;
  /** Set when KEYGATE_SCANNING_PORT is: the secret scanning endpoint's own listener. */
  readonly scanningUrl: string | undefined;
  readonly port: number;
  readonly keygate: Keygate;
  readonly config: Config;
  /** Every log line written, raw. */
  readonly logs: string[];
  close(): Promise<void>;
}

export interface StartKeygateOptions {
  upstream: string;
  redisUrl?: string;
  keys?: KeyRecord[];
  env?: Record<string, string>;
  clock?: Clock;
  store?: Store;
  /** Changes the loaded config before start: settings no variable sets (the webhooks' retry delays). */
  adjust?: (config: Config) => Config;
}

export async function startKeygate(options: StartKeygateOptions): Promise<RunningKeygate> {
  const loaded = loadConfig({
    KEYGATE_UPSTREAM: options.upstream,
    KEYGATE_PORT: '0',
    KEYGATE_ADMIN_PORT: '0',
    KEYGATE_HOST: '127.0.0.1',
    KEYGATE_ADMIN_HOST: '127.0.0.1',
    KEYGATE_LOG_LEVEL: 'debug',
    ...(options.redisUrl && { KEYGATE_REDIS_URL: options.redisUrl }),
    ...options.env,
  });
  const config = options.adjust ? options.adjust(loaded) : loaded;
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  });
  const logger = pino({ level: 'debug', redact: { paths: REDACT_PATHS, censor: '[redacted]' } }, sink);
  const clock = options.clock ?? systemClock();
  const store =
    options.store ??
    (config.redis || config.keysFile ? undefined : createMemoryStore({ keys: options.keys ?? [] }, { clock }));
  const keygate = createKeygate(config, { logger, clock, ...(store && { store }) });
  if (config.redis) {
    await waitStoreReady(keygate.store);
    await putKeys(keygate.store, options.keys ?? []);
  }
  const { port, adminPort, managementPort, scanningPort } = await keygate.listen();
  return {
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${adminPort}`,
    managementUrl: managementPort === undefined ? undefined : `http://127.0.0.1:${managementPort}`,
    scanningUrl: scanningPort === undefined ? undefined : `http://127.0.0.1:${scanningPort}`,
    port,
    keygate,
    config,
    logs,
    close: () => keygate.close(),
  };
}

/**
 * Writes `keys` for a test's set-up. Each write runs under the store's command deadline (500 ms): on a loaded machine
 * Redis may not answer within it, an honest refusal (StoreUnavailableError) that is written again, under a hang
 * guard, since the set-up needs the keys, not a fast Redis.
 */
export async function putKeys(store: Store, keys: readonly KeyRecord[]): Promise<void> {
  const deadline = Date.now() + guard(30_000);
  for (const k of keys)
    for (;;) {
      try {
        await store.putKey(k);
        break;
      } catch (err) {
        if (!(err instanceof StoreUnavailableError) || Date.now() > deadline) throw err;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
}

export { waitStoreReady } from '../../src/store/wait-ready.js';
