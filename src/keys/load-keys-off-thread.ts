// Tested in test/e2e/load-keys-off-thread.test.ts.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { KeysFileError } from './keys-file.js';
import type { KeyRecord } from './key-record.js';
import type { OwnerRecord } from './owner-record.js';
import type { KeysFileWorkerData, KeysFileWorkerMessage } from './keys-file-worker.js';

/**
 * Records per batch. Each costs the serving thread its deserialisation; each round trip waits for a
 * turn of a busy loop. One run at load 22 (docs/performance.md): 1,000 per batch, longest answer
 * 730 ms and the set in force after 33 s; 5,000, 1,667 ms and 27 s. The pause matters more.
 */
const BATCH_SIZE = 1_000;

/**
 * The worker's compiled entry. Under the test runner this module is TypeScript source, which a
 * worker thread cannot load: the built copy in dist/ (which the test tiers build first) is used.
 */
function workerPath(): string {
  const beside = fileURLToPath(new URL('./keys-file-worker.js', import.meta.url));
  if (existsSync(beside)) return beside;
  return fileURLToPath(new URL('../../dist/keys/keys-file-worker.js', import.meta.url));
}

/**
 * Loads a keys file on a worker thread (parse, schema and record checks all happen there) and
 * passes the records to `onBatch` a batch at a time, each in its own event-loop turn, so
 * requests keep being served in between. Resolves with the count once all are delivered;
 * rejects with KeysFileError (every problem) when the file is broken, or when `signal` aborts.
 * The records arrive as plain data (structured clone); parseKeyRecord made them in the worker.
 */
export function loadKeysOffThread(
  file: string,
  onBatch: (records: readonly KeyRecord[]) => void,
  signal?: AbortSignal,
  /** The file's `owners:`, passed once every key batch has been. */
  onOwners?: (owners: readonly OwnerRecord[]) => void,
): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const workerData: KeysFileWorkerData = { file, batchSize: BATCH_SIZE };
    const worker = new Worker(workerPath(), { workerData });
    let settled = false;
    const finish = (err: Error | undefined, count = 0) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', abort);
      void worker.terminate();
      if (err) reject(err);
      else resolve(count);
    };
    const abort = () => finish(new KeysFileError([`${file}: load cancelled`]));
    if (signal?.aborted) return abort();
    signal?.addEventListener('abort', abort);
    worker.on('message', (m: KeysFileWorkerMessage) => {
      if (m.kind === 'rejected') return finish(new KeysFileError(m.problems));
      if (m.kind === 'done') {
        onOwners?.(m.owners as OwnerRecord[]);
        return finish(undefined, m.count);
      }
      try {
        onBatch(m.records as KeyRecord[]);
      } catch (err) {
        return finish(err as Error);
      }
      // Asked for after this turn's I/O, not now: a port delivers every message that arrives while it
      // is being drained (up to 1,000) in the same turn, and the worker answers faster than a batch
      // is added, so asking at once chained batch after batch into one block of hundreds of ms.
      setImmediate(() => settled || worker.postMessage('next'));
    });
    worker.on('error', (err) => finish(new KeysFileError([`${file}: ${err.message}`])));
    worker.on('exit', (code) => finish(new KeysFileError([`${file}: loader thread exited (${code})`])));
    worker.postMessage('next');
  });
}
