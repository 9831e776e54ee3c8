import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import {
  openStream,
  refusalOf,
  startWsUpstream,
  STREAM_PATH,
  STREAM_SCOPE,
  type ClientStream,
} from '../helpers/ws-streams.js';

const SECRET = 'stream-cost-secret-0123456789';

/**
 * Issue 42: a WebSocket upgrade spends its route's cost like any request (upgrade-path.ts walks the
 * same steps; the admit step charges the matched route's cost). A key of 10/h burst 10 on a stream
 * route of cost 5 opens exactly two streams, then 429 10429 with nothing sent upstream; an owner's
 * budget is charged the same cost.
 */
describe('streams are charged their route cost', () => {
  let upstream: Awaited<ReturnType<typeof startWsUpstream>>;
  let gate: RunningKeygate;
  const open: ClientStream[] = [];

  beforeAll(async () => {
    upstream = await startWsUpstream();
    const dir = mkdtempSync(join(tmpdir(), 'keygate-stream-cost-'));
    const policy = join(dir, 'routes.yaml');
    writeFileSync(
      policy,
      [
        'routes:',
        `  - { method: GET, path: '/api/v3/stream/:channel', scopes: [${STREAM_SCOPE}], upgrade: websocket, cost: 5 }`,
        '',
      ].join('\n'),
    );
    gate = await startKeygate({
      upstream: upstream.url,
      keys: [
        makeKey({ apiKey: 'ten', secret: SECRET, scopes: [STREAM_SCOPE], rateLimit: { rate: '10/h', burst: 10 } }),
        makeKey({ apiKey: 'ten-b', secret: SECRET, scopes: [STREAM_SCOPE], owner: 'o' }),
      ],
      env: { KEYGATE_CONFIG: policy, KEYGATE_MAX_STREAMS_PER_KEY: '10' },
    });
  });
  afterAll(async () => {
    for (const s of open) s.ws.terminate();
    await gate?.close();
    await upstream?.close();
  });

  it('a key of 10/h burst 10 opens two streams of cost 5, the third is 429 10429 and never reaches the upstream', async () => {
    open.push(await openStream(gate.url, 'ten', SECRET, STREAM_PATH));
    open.push(await openStream(gate.url, 'ten', SECRET, STREAM_PATH));
    expect(await refusalOf(openStream(gate.url, 'ten', SECRET, STREAM_PATH))).toEqual({ status: 429, code: 10429 });
    await expect.poll(() => upstream.connections.length).toBe(2);
    // Another key is untouched by the first one's budget.
    open.push(await openStream(gate.url, 'ten-b', SECRET, STREAM_PATH));
    await expect.poll(() => upstream.connections.length).toBe(3);
  });
});
