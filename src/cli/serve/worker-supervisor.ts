// Tested in test/process/workers.test.ts.
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import { isMessage } from './worker-messages.js';
import { streamCount } from './worker-streams.js';

export interface WorkerSupervisor {
  /** Forks the workers; rejects when one exits before it listens. */
  start(): Promise<void>;
  /** The workers still connected. */
  live(): Worker[];
  /** The proxy port, as the workers report it once they listen (port 0 in the config = any free port). */
  proxyPort(): number;
  /** Resolves with the reason once workers die too often, or a replacement cannot start. */
  readonly gaveUp: Promise<string>;
  /** True once stopAll was called: a worker exiting then is not replaced, and /readyz says shutting_down. */
  stopping(): boolean;
  /** SIGTERM to every worker (SIGKILL after the shutdown deadline and 5 s more); true when every one exited 0. */
  stopAll(): Promise<boolean>;
}

/**
 * The primary's workers: forks them, replaces one that dies (at most 5 within 60 s, then gives up), and
 * stops them all at shutdown.
 */
export function createWorkerSupervisor(
  options: { workers: number; port: number; shutdownTimeoutMs: number; maxStreamsPerKey: number },
  deps: { logger: Logger },
): WorkerSupervisor {
  // The instance's stream count per key, for every worker (KEYGATE_MAX_STREAMS_PER_KEY is per instance).
  const streams = streamCount(options.maxStreamsPerKey);
  const { logger } = deps;
  let stopping = false;
  let proxyPort = options.port;
  const restarts: number[] = [];
  let giveUp: (reason: string) => void = () => {};
  const gaveUp = new Promise<string>((resolve) => (giveUp = resolve));

  const fork = (): Promise<Worker> =>
    new Promise((resolve, reject) => {
      const worker = cluster.fork();
      const onExit = (code: number | null, signal: string | null) =>
        reject(new Error(`worker ${worker.process.pid} exited before listening (code ${code}, signal ${signal})`));
      worker.once('exit', onExit);
      worker.once('exit', () => streams.workerGone(worker));
      worker.on('message', (m: unknown) => {
        if (isMessage(m) && (m.type === 'keygate:stream-take' || m.type === 'keygate:stream-give'))
          return streams.onMessage(worker, m);
        if (isMessage(m) && m.type === 'keygate:listening') {
          proxyPort = m.port;
          worker.off('exit', onExit);
          worker.once('exit', (code, signal) => onWorkerExit(worker, code, signal));
          resolve(worker);
        }
      });
    });

  const onWorkerExit = (worker: Worker, code: number | null, signal: string | null) => {
    if (stopping) return;
    logger.error({ workerPid: worker.process.pid, code, signal }, 'worker died; starting a replacement');
    const now = Date.now();
    restarts.push(now);
    while (restarts.length > 0 && restarts[0]! < now - 60_000) restarts.shift();
    if (restarts.length > 5) return giveUp('more than 5 worker restarts within 60 s');
    fork().catch((err: Error) => giveUp(err.message));
  };

  const all = () => Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined);

  return {
    start: async () => void (await Promise.all(Array.from({ length: options.workers }, fork))),
    live: () => all().filter((w) => w.isConnected()),
    proxyPort: () => proxyPort,
    gaveUp,
    stopping: () => stopping,
    async stopAll() {
      stopping = true;
      const workers = all();
      const exits = workers.map(
        (w) =>
          new Promise<boolean>((resolve) =>
            w.isDead() ? resolve(w.process.exitCode === 0) : w.once('exit', (code) => resolve(code === 0)),
          ),
      );
      for (const w of workers) w.process.kill('SIGTERM');
      const hardStop = setTimeout(() => {
        for (const w of workers) if (!w.isDead()) w.process.kill('SIGKILL');
      }, options.shutdownTimeoutMs + 5_000);
      const results = await Promise.all(exits);
      clearTimeout(hardStop);
      return results.every(Boolean);
    },
  };
}
