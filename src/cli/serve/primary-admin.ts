// Tested in test/process/workers.test.ts.
import type { Server } from 'node:http';
import { AggregatorRegistry } from 'prom-client';
import type { Config } from '../../config/load-config.js';
import { createAdminServer } from '../../observe/admin-server.js';
import { createWorkerQuestions, type NotReadyAnswer } from './worker-messages.js';
import type { WorkerSupervisor } from './worker-supervisor.js';

/**
 * The primary's admin port, which it serves for all its workers: /metrics is the sum of every worker's
 * registry (prom-client's aggregator, over the cluster's IPC), /readyz asks every worker and answers with
 * the first that is not ready, and the JWK Set is the primary's own copy of the assertion keys.
 * `countKeys` asks one worker how many keys the store holds (the primary has no store).
 */
export function createPrimaryAdmin(
  config: Pick<Config, 'limits' | 'workers'>,
  deps: { supervisor: WorkerSupervisor; jwks?: () => unknown },
): { server: Server; countKeys(): Promise<number> } {
  const { supervisor } = deps;
  const aggregator = new AggregatorRegistry();
  const ask = createWorkerQuestions();

  const ready = async (): Promise<NotReadyAnswer | undefined> => {
    if (supervisor.stopping()) return { reason: 'shutting_down' };
    const workers = supervisor.live();
    if (workers.length < config.workers) return { reason: 'worker_missing' };
    const answers = await Promise.all(
      workers.map(async (w) => {
        const answer = await ask(w, 'keygate:readyz', 2_000);
        return answer ? answer.notReady : { reason: 'worker_unresponsive' };
      }),
    );
    return answers.find((a) => a !== undefined);
  };

  const server = createAdminServer(
    { limits: config.limits },
    {
      metrics: { registry: { contentType: aggregator.contentType, metrics: () => aggregator.clusterMetrics() } },
      ready,
      ...(deps.jwks && { jwks: deps.jwks }),
    },
  );

  /** Rejects when no worker can tell (none live, Redis down, no answer in 5 s). */
  const countKeys = async (): Promise<number> => {
    const worker = supervisor.live()[0];
    if (worker === undefined) throw new Error('no worker');
    const answer = await ask(worker, 'keygate:count-keys', 5_000);
    if (answer === undefined) throw new Error('no answer');
    if (answer.count === undefined) throw new Error(answer.err ?? 'no count');
    return answer.count;
  };

  return { server, countKeys };
}
