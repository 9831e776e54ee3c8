import { mkdtempSync, writeFileSync } from 'node:fs';
import type { OutgoingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KeyRecord } from '../../src/keys/key-record.js';
import { newAssertionKey } from '../../src/assertion/assertion-keys.js';
import { startCaddy } from './caddy.js';
import { send, type Reply } from './http.js';
import { startKeygate, type RunningKeygate } from './keygate.js';
import { startNginx } from './nginx.js';
import type { Received, RecordingUpstream } from './recording-upstream.js';
import { startRedis, type TestRedis } from './redis-server.js';

/**
 * The parity table (issue 31): the same request sent to Keygate in proxy mode and through each
 * shipped forward-auth recipe on a real proxy must give the client the same answer (status, body,
 * header lines) and the service the same request (method, target, body, header lines).
 */

/** Where a request goes in: Keygate itself (proxy mode), or a real proxy asking Keygate (forward-auth). */
export interface World {
  readonly name: string;
  readonly url: string;
  readonly keygate: RunningKeygate;
  readonly redis: TestRedis | undefined;
  stop(): Promise<void>;
}

export type Recipe = 'nginx' | 'caddy';

/**
 * One Keygate (its own Redis, or the embedded store) in proxy mode, or in forward-auth mode behind
 * the recipe run for real with only its placeholders filled. Proxy mode trusts no proxy (the test
 * client is a client); forward-auth trusts the local proxy only.
 */
export async function startWorld(
  mode: 'proxy' | Recipe,
  options: { upstream: RecordingUpstream; keys: KeyRecord[]; policy: string; redis: boolean; assertion?: boolean },
): Promise<World> {
  const redis = options.redis ? await startRedis() : undefined;
  const dir = mkdtempSync(join(tmpdir(), 'keygate-parity-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `${options.policy}trustedProxies: [${mode === 'proxy' ? '' : '127.0.0.1/32'}]\n`);
  const assertionKeys = join(dir, 'assertion-keys.json');
  if (options.assertion)
    writeFileSync(assertionKeys, JSON.stringify({ keys: [newAssertionKey('EdDSA')] }), { mode: 0o600 });
  const keygate = await startKeygate({
    upstream: mode === 'proxy' ? options.upstream.url : 'http://unused.invalid',
    ...(redis && { redisUrl: redis.url }),
    keys: options.keys,
    env: {
      KEYGATE_CONFIG: policy,
      ...(mode !== 'proxy' && { KEYGATE_MODE: 'forward-auth' }),
      ...(options.assertion && {
        KEYGATE_ASSERTION_KEYS_FILE: assertionKeys,
        KEYGATE_ASSERTION_AUDIENCE: ASSERTION_AUDIENCE,
      }),
    },
  });
  const proxy =
    mode === 'nginx'
      ? await startNginx(keygate.url, options.upstream.url)
      : mode === 'caddy'
        ? await startCaddy(keygate.url, options.upstream.url)
        : undefined;
  return {
    name: mode === 'proxy' ? 'proxy mode' : mode,
    url: proxy?.url ?? keygate.url,
    keygate,
    redis,
    async stop() {
      await proxy?.stop();
      await keygate.close();
      await redis?.stop();
    },
  };
}

/** The audience of the worlds started with the assertion on. */
export const ASSERTION_AUDIENCE = 'parity-service';

/** One row: a request (fresh token on every call), sent `before` extra times first (to use up a rate limit). */
export interface ParityRow {
  readonly name: string;
  readonly method?: string;
  readonly path: string;
  readonly headers: () => OutgoingHttpHeaders;
  readonly body?: string;
  readonly before?: number;
  /**
   * A known, stated difference: behind this recipe the request is answered as proxy mode answers
   * `asIf` (the same request without what the proxy drops), for the reason given.
   */
  readonly unlike?: Partial<Record<Recipe, { readonly because: string; readonly asIf: ParityRow }>>;
}

/** What one world made of a row: the client's answer and what the service received for it (if anything). */
export interface Outcome {
  readonly reply: Reply;
  readonly received: Received[];
}

export async function runRow(world: World, upstream: RecordingUpstream, row: ParityRow): Promise<Outcome> {
  const request = () =>
    send(world.url, row.path, {
      method: row.method ?? 'GET',
      headers: row.headers(),
      ...(row.body !== undefined && { body: row.body }),
    });
  for (let i = 0; i < (row.before ?? 0); i++) await request();
  const from = upstream.received.length;
  const reply = await request();
  // The service's record is complete once its body has ended (the answer can overtake it by a tick).
  const deadline = Date.now() + 2_000;
  while (upstream.received.slice(from).some((r) => !r.complete) && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 5));
  return { reply, received: upstream.received.slice(from) };
}

/**
 * Header lines that belong to one hop, not to the answer or the request: framing and connection
 * management (each hop frames its own message), and the Date and Server every HTTP server stamps.
 * Everything else is compared, repeats included.
 */
const HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'date',
  'server',
]);
/** Compared by name only: values that are per request (ids, clocks) or per listener (Host with its port). */
const VOLATILE: ReadonlySet<string> = new Set([
  'x-request-id',
  'x-server-time',
  'host',
  'x-forwarded-host',
  // Each world signs with its own key: checked by verifying it (expectAssertions), not by value.
  'x-keygate-assertion',
]);

/** The header lines as compared: lower-case "name: value" (value kept unless volatile), sorted; repeats stay. */
export function headerLines(raw: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (HOP.has(name)) continue;
    const value = raw[i + 1] as string;
    out.push(
      VOLATILE.has(name) ? `${name}: …` : `${name}: ${name === 'ratelimit' ? value.replace(/;t=\d+/, ';t=…') : value}`,
    );
  }
  return out.sort();
}

/** A body as compared: the server time (19 digits) differs per request. */
export const bodyShape = (body: string) => body.replace(/\d{19}/g, 'N');

/** What the client got, as compared. */
export function clientView(o: Outcome) {
  return { status: o.reply.status, body: bodyShape(o.reply.body), headers: headerLines(o.reply.rawHeaders) };
}

/** What the service got, as compared (nothing, when the request was not forwarded). */
export function upstreamView(o: Outcome) {
  return o.received.map((r) => ({ method: r.method, url: r.url, body: r.body, headers: headerLines(r.rawHeaders) }));
}

/** The difference between two header-line lists, for a readable table cell. */
export function lineDiff(want: readonly string[], got: readonly string[]): string {
  // Multisets: a repeated line (two WWW-Authenticate) is a difference.
  const extra = [...got];
  const missing: string[] = [];
  for (const l of want) {
    const i = extra.indexOf(l);
    if (i === -1) missing.push(l);
    else extra.splice(i, 1);
  }
  return [...missing.map((l) => `-${l}`), ...extra.map((l) => `+${l}`)].join(' ');
}
