// Tested in test/e2e/webhook-deliveries.test.ts (keygate webhooks through main()).
import { MANAGEMENT_ERRORS } from '../../errors.js';
import { escapeUnprintable } from '../../keys/printable-text.js';
import {
  createWebhookOperations,
  DELIVERIES_MAX_LIMIT,
  noSuchEvent,
  type DeliveryView,
  type WebhookOperations,
} from '../../operations/webhook-operations.js';
import { CliError } from '../cli-errors.js';
import type { CliIo } from '../cli-io.js';
import { flag, type Command } from '../command-line.js';
import { JSON_OPTION } from './key-context.js';

const DETAILS = `Webhook events Keygate has attempted and not yet delivered: first attempts
in flight and events waiting for a retry, oldest first, read from Redis by the
same operations as the management API's /v1/webhooks/deliveries. retry makes a
waiting event's next attempt due now: an instance sends it within about a
second, with the same webhook-id. Events not read yet and events given up are
not listed (docs/management-api.md#webhooks).
Exit status: 0 done, 1 no such event waiting, one being attempted right now,
or Redis did not answer, 2 usage.`;

/** One line per event: its webhook-id, type, state, attempts, next attempt, last error and the instance holding it. */
const line = (d: DeliveryView) =>
  `${escapeUnprintable(
    [
      d.id,
      d.type ?? '-',
      d.state,
      `attempts=${d.attempts}`,
      `next=${d.nextAttemptAt ?? '-'}`,
      `last=${d.lastError ?? '-'}`,
      d.instance ?? '-',
    ].join('  '),
  )}\n`;

/** The store `keygate keys` opens (Redis, from the environment), the webhook operations on it, closed after `run`. */
async function withWebhooks(io: CliIo, run: (ops: WebhookOperations) => Promise<void>): Promise<number> {
  const { store } = await io.openKeyStore(io.env);
  try {
    const ops = createWebhookOperations({ store, now: () => Date.now() });
    if (!ops) throw new CliError(MANAGEMENT_ERRORS.webhooks_need_redis.message, 1);
    await run(ops);
    return 0;
  } finally {
    await store.close();
  }
}

const listCommand: Command = {
  spec: {
    name: 'list',
    summary: 'list the webhook events not yet delivered (attempts, next attempt, last error, instance)',
    options: [JSON_OPTION],
  },
  run: (p, io) =>
    withWebhooks(io, async (ops) => {
      const json = flag(p, 'json');
      const all: DeliveryView[] = [];
      let cursor: string | undefined;
      do {
        const page = await ops.list({ limit: DELIVERIES_MAX_LIMIT, ...(cursor !== undefined && { cursor }) });
        if (json) all.push(...page.deliveries);
        else for (const d of page.deliveries) io.out.write(line(d));
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
      if (json) io.out.write(`${JSON.stringify(all, null, 2)}\n`);
    }),
};

const retryCommand: Command = {
  spec: {
    name: 'retry',
    summary: "make a waiting webhook event's next attempt due now",
    args: ['<id>'],
    options: [JSON_OPTION],
  },
  run: (p, io) =>
    withWebhooks(io, async (ops) => {
      const id = p.args[0] as string;
      const r = await ops.retry(id);
      if (!r.ok) throw new CliError(r.refused === 'conflict' ? r.message : noSuchEvent(escapeUnprintable(id)), 1);
      if (flag(p, 'json')) io.out.write(`${JSON.stringify(r.value, null, 2)}\n`);
      else io.out.write(`${r.value.id} due now (${r.value.nextAttemptAt})\n`);
    }),
};

/** `keygate webhooks list|retry`: the same store as `keygate keys`, the same operations as the management API. */
export const webhooksCommand: Command = {
  spec: { name: 'webhooks', summary: 'see and hurry webhook deliveries in Redis', options: [], details: DETAILS },
  subcommands: [listCommand, retryCommand],
};
