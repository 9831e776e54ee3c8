// Tested in test/process/workers.test.ts.
import type { Worker } from 'node:cluster';
import type { SharedStreamCount } from '../../gateway/streams/stream-registry.js';
import { isMessage, type Message } from './worker-messages.js';

/**
 * A worker's side of the instance's stream count: the primary holds it (streamCount below). An answer
 * that does not come within 2 s is no room (fail closed: the primary is gone or stuck).
 */
export function streamsCountedByPrimary(): SharedStreamCount {
  let nextId = 0;
  const waiting = new Map<number, (ok: boolean) => void>();
  process.on('message', (m: unknown) => {
    if (isMessage(m) && m.type === 'keygate:stream-take') waiting.get(m.id)?.(m.ok === true);
  });
  return {
    take: (apiKey) =>
      new Promise<boolean>((resolve) => {
        const id = nextId++;
        const timer = setTimeout(() => done(false), 2_000);
        const done = (ok: boolean) => {
          clearTimeout(timer);
          waiting.delete(id);
          resolve(ok);
        };
        waiting.set(id, done);
        if (process.send?.({ type: 'keygate:stream-take', id, apiKey }) !== true) done(false);
      }),
    give: (apiKey) => void process.send?.({ type: 'keygate:stream-give', apiKey }),
  };
}

/**
 * The primary's count of every worker's streams by key (KEYGATE_MAX_STREAMS_PER_KEY is per instance).
 * A worker that dies takes its streams with it, so its counts go too.
 */
export function streamCount(maxPerKey: number) {
  const byWorker = new Map<number, Map<string, number>>();
  const total = new Map<string, number>();
  const add = (workerId: number, apiKey: string, n: number) => {
    const mine = byWorker.get(workerId) ?? new Map<string, number>();
    byWorker.set(workerId, mine);
    const m = (mine.get(apiKey) ?? 0) + n;
    const t = (total.get(apiKey) ?? 0) + n;
    if (m > 0) mine.set(apiKey, m);
    else mine.delete(apiKey);
    if (t > 0) total.set(apiKey, t);
    else total.delete(apiKey);
  };
  return {
    onMessage(worker: Worker, m: Message) {
      if (m.type === 'keygate:stream-give' && (byWorker.get(worker.id)?.get(m.apiKey) ?? 0) > 0)
        add(worker.id, m.apiKey, -1);
      else if (m.type === 'keygate:stream-take') {
        const ok = (total.get(m.apiKey) ?? 0) < maxPerKey;
        if (ok) add(worker.id, m.apiKey, 1);
        if (worker.isConnected()) worker.send({ type: 'keygate:stream-take', id: m.id, apiKey: m.apiKey, ok });
      }
    },
    workerGone(worker: Worker) {
      for (const [apiKey, n] of byWorker.get(worker.id) ?? []) add(worker.id, apiKey, -n);
      byWorker.delete(worker.id);
    },
  };
}
