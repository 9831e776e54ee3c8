// Tested in test/process/workers.test.ts.
import type { Worker } from 'node:cluster';

/** IPC between the primary and its workers (besides prom-client's own metrics messages). */
export type NotReadyAnswer = { reason: string; cause?: string; err?: string };
export type Message =
  | { type: 'keygate:listening'; port: number }
  | { type: 'keygate:readyz'; id: number; notReady?: NotReadyAnswer }
  /** The primary asks a worker how many keys the store holds (the empty-store warning); `err` when it could not tell. */
  | { type: 'keygate:count-keys'; id: number; count?: number; err?: string }
  /** A worker asks the primary for room for one more stream of a key (`ok` in the answer); `give` hands one back. */
  | { type: 'keygate:stream-take'; id: number; apiKey: string; ok?: boolean }
  | { type: 'keygate:stream-give'; apiKey: string };

export const isMessage = (m: unknown): m is Message =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as { type?: unknown }).type === 'string' &&
  (m as { type: string }).type.startsWith('keygate:');

type Question = Exclude<Extract<Message, { id: number }>['type'], 'keygate:stream-take'>;

/**
 * Asks one worker a question and resolves with its answer (the message of that type with the same id), or
 * with undefined when none came within `timeoutMs`. Each asker numbers its own questions.
 */
export function createWorkerQuestions(): <T extends Question>(
  worker: Worker,
  type: T,
  timeoutMs: number,
) => Promise<Extract<Message, { type: T }> | undefined> {
  let nextId = 0;
  return (worker, type, timeoutMs) =>
    new Promise((resolve) => {
      const id = nextId++;
      const timer = setTimeout(() => done(undefined), timeoutMs);
      const onMessage = (m: unknown) => {
        if (isMessage(m) && m.type === type && m.id === id) done(m as Extract<Message, { type: typeof type }>);
      };
      const done = (answer: Extract<Message, { type: typeof type }> | undefined) => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        resolve(answer);
      };
      worker.on('message', onMessage);
      worker.send({ type, id });
    });
}
