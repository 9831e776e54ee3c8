import type { RedisConnection } from './redis-settings.js';
import { readEnvInt, type Env } from './read-env-int.js';
import { readSecretEnv } from './secret-env.js';

/**
 * The signed webhooks (KEYGATE_WEBHOOK_URL): where key events are posted and the key they are signed with.
 * The key is secret bytes, like the Redis password: describeWebhook below is what may be shown.
 */
export interface WebhookSettings {
  readonly url: URL;
  /** The base64-decoded part of the `whsec_` secret: the HMAC-SHA256 key. */
  readonly signingKey: Uint8Array;
  /** One attempt's deadline (connect, answer and body), in ms (KEYGATE_WEBHOOK_TIMEOUT_MS). */
  readonly timeoutMs: number;
  /**
   * The wait before each retry after a failed attempt, in ms, the last repeated; retries end with the
   * first failed attempt at least `retryForMs` after the event's first attempt. Not an environment
   * setting: tests pass shorter ones (test/e2e/webhooks.test.ts).
   */
  readonly retryDelaysMs: readonly number[];
  readonly retryForMs: number;
}

/**
 * After a failed attempt: 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, then every 8 h. The first
 * retry comes well within 10 s (a receiver that restarted is back quickly); the attempts go on past 24 h
 * (the last one about 32 h after the first), so a receiver down over a whole day still gets every event.
 */
export const WEBHOOK_RETRY_DELAYS_MS: readonly number[] = [
  5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000,
];
export const WEBHOOK_RETRY_FOR_MS = 24 * 3_600_000;

/** Standard Webhooks: `whsec_` and the base64 of 24 to 64 random bytes. */
const WHSEC = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/**
 * Reads the webhook settings: off unless KEYGATE_WEBHOOK_URL is set; then the secret is required, and
 * Redis too, because the deliveries, their claims and their retries are kept in Redis (a consumer group
 * on the audit stream), where any instance can finish what another began.
 */
export function readWebhook(
  env: Env,
  redis: RedisConnection | undefined,
  problems: string[],
): WebhookSettings | undefined {
  const rawUrl = env.KEYGATE_WEBHOOK_URL || undefined;
  const secret = readSecretEnv(env, 'KEYGATE_WEBHOOK_SECRET', 'KEYGATE_WEBHOOK_SECRET_FILE', problems);
  const timeoutMs = readEnvInt(env, 'KEYGATE_WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000, problems);
  if (rawUrl === undefined) {
    if (secret !== undefined)
      problems.push('KEYGATE_WEBHOOK_SECRET: set, but KEYGATE_WEBHOOK_URL is not (the receiver the events go to)');
    if (env.KEYGATE_WEBHOOK_TIMEOUT_MS)
      problems.push('KEYGATE_WEBHOOK_TIMEOUT_MS: set, but KEYGATE_WEBHOOK_URL is not');
    return undefined;
  }
  let url: URL | undefined;
  try {
    url = new URL(rawUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      problems.push(`KEYGATE_WEBHOOK_URL: must start with http:// or https://, got ${url.protocol}`);
      url = undefined;
    } else if (url.hash) {
      problems.push('KEYGATE_WEBHOOK_URL: must not have a #fragment');
      url = undefined;
    }
  } catch {
    // Not quoted: the URL may carry credentials.
    problems.push('KEYGATE_WEBHOOK_URL: not a URL (http://host[:port]/path or https://…)');
  }
  if (!redis)
    problems.push(
      'KEYGATE_WEBHOOK_URL needs KEYGATE_REDIS_URL (or KEYGATE_REDIS_SENTINELS, KEYGATE_REDIS_CLUSTER_NODES): ' +
        'deliveries and their retries are kept in Redis, where another instance can finish them',
    );
  const signingKey = secret === undefined ? undefined : readSigningKey(secret, problems);
  if (secret === undefined)
    problems.push(
      'KEYGATE_WEBHOOK_SECRET (or KEYGATE_WEBHOOK_SECRET_FILE): required with KEYGATE_WEBHOOK_URL ' +
        '(a Standard Webhooks secret, whsec_ and the base64 of 24 to 64 random bytes)',
    );
  if (!url || !signingKey) return undefined;
  return { url, signingKey, timeoutMs, retryDelaysMs: WEBHOOK_RETRY_DELAYS_MS, retryForMs: WEBHOOK_RETRY_FOR_MS };
}

/** The HMAC key of a `whsec_` secret; problems never quote the secret. */
function readSigningKey(secret: string, problems: string[]): Uint8Array | undefined {
  const m = WHSEC.exec(secret);
  const bytes = m ? Buffer.from(m[1]!, 'base64') : undefined;
  // Buffer.from ignores bad padding; a round trip proves the text was the base64 of these bytes.
  if (!m || !bytes || bytes.toString('base64').replace(/=+$/, '') !== m[1]!.replace(/=+$/, '')) {
    problems.push('KEYGATE_WEBHOOK_SECRET: must be whsec_ followed by base64 (a Standard Webhooks secret)');
    return undefined;
  }
  if (bytes.length < 24 || bytes.length > 64) {
    problems.push(`KEYGATE_WEBHOOK_SECRET: must encode 24 to 64 bytes, got ${bytes.length}`);
    return undefined;
  }
  return new Uint8Array(bytes);
}

/**
 * A receiver's URL as it may be shown: scheme, host and path, and the query's names with every value
 * masked. A receiver may take its credential in any query parameter (Azure Functions: `?code=`), so no
 * list of suspicious names can be complete; user and password are left out altogether.
 */
export function maskedWebhookUrl(url: URL): string {
  const query = [...url.searchParams.keys()].map((name) => `${encodeURIComponent(name)}=***`).join('&');
  return `${url.protocol}//${url.host}${url.pathname}${query ? `?${query}` : ''}`;
}

/** For logs and check-config: the receiver without its credentials, never the secret. */
export function describeWebhook(settings: WebhookSettings | undefined): Record<string, unknown> | undefined {
  if (!settings) return undefined;
  return { url: maskedWebhookUrl(settings.url), timeoutMs: settings.timeoutMs };
}
