import { fileURLToPath } from 'node:url';
import ccxt, { type bigone as BigOne } from 'ccxt';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startExchangeUpstream } from '../helpers/exchange-upstream.js';
import { parseExposition, valueOf } from '../helpers/exposition.js';
import { send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import type { RecordingUpstream } from '../helpers/recording-upstream.js';

/** The policy shipped for a BigONE-shaped API, used as shipped. */
const POLICY = fileURLToPath(new URL('../../examples/bigone-policy.yaml', import.meta.url));
const SECRET = 'ccxt-secret-0123456789abcdef';

/**
 * CCXT, the client most people use for this API, through Keygate in front of an
 * upstream that answers in that API's shapes. CCXT's `bigone` class signs
 * exactly as the contract says; Keygate verifies, forwards and refuses, and CCXT
 * turns the refusals into its own errors. Real Redis, real sockets, CCXT unmodified
 * apart from its URLs (and, where said, its nonce).
 */
describe('CCXT (bigone) through Keygate', () => {
  let redis: TestRedis;
  let upstream: RecordingUpstream & { orders: Map<string, Record<string, unknown>> };
  let gate: RunningKeygate;

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startExchangeUpstream();
    gate = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys: [
        makeKey({ apiKey: 'trader', secret: SECRET, scopes: ['accounts:read', 'orders:read', 'trade'] }),
        // One key per parallel test: nonces are per key, and CCXT's (now - 100 ms, in whole milliseconds)
        // could meet another test's nonce on the same key.
        makeKey({ apiKey: 'parallel', secret: SECRET, scopes: ['accounts:read'] }),
        makeKey({ apiKey: 'burst', secret: SECRET, scopes: ['accounts:read'] }),
        makeKey({ apiKey: 'reader', secret: SECRET, scopes: ['accounts:read'] }),
        makeKey({ apiKey: 'limited', secret: SECRET, scopes: ['accounts:read'], rateLimit: { rate: '1/m', burst: 1 } }),
      ],
      env: { KEYGATE_CONFIG: POLICY },
    });
  });
  afterAll(async () => {
    await gate?.close();
    await upstream?.close();
    await redis?.stop();
  });
  beforeEach(() => {
    upstream.received.length = 0;
  });

  /** What a user writes: CCXT's bigone class with its URLs pointed at Keygate (docs/ccxt.md). */
  const client = (apiKey?: string, secret?: string): BigOne =>
    new ccxt.bigone({
      apiKey,
      secret,
      // Off so that parallel calls really are parallel (CCXT's own throttle would space them 20 ms apart).
      enableRateLimit: false,
      urls: {
        api: {
          public: `${gate.url}/api/v3`,
          private: `${gate.url}/api/v3/viewer`,
          contractPublic: `${gate.url}/api/contract/v2`,
          contractPrivate: `${gate.url}/api/contract/v2`,
          // No trailing slash: CCXT joins with "/", and Keygate refuses a path with "//" in it (400 bad_target).
          webExchange: `${gate.url}/api`,
        },
      },
    });
  /** The one-line fix for parallel calls: a strictly increasing nanosecond nonce. */
  const withIncreasingNonce = (exchange: BigOne): BigOne => {
    let last = 0n;
    exchange.nonce = () => {
      const now = BigInt(Date.now()) * 1_000_000n;
      last = now > last ? now : last + 1n;
      return last as unknown as number;
    };
    return exchange;
  };
  const keyIdsOf = (r: { rawHeaders: string[] }) =>
    r.rawHeaders.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === 'x-api-key-id' ? [r.rawHeaders[i + 1]] : []));
  const metric = async (name: string, labels: Record<string, string>) =>
    valueOf(parseExposition((await send(gate.adminUrl, '/metrics')).body), name, labels) ?? 0;

  it('loads markets over the public routes, then reads the time, the balance, places and cancels an order', async () => {
    const exchange = client('trader', SECRET);
    const markets = await exchange.loadMarkets();
    expect(Object.keys(markets).sort()).toEqual(['BTC/USD:BTC', 'BTC/USDT', 'ETH/USDT']);
    expect(Object.keys(exchange.currencies).sort()).toEqual(['BTC', 'ETH', 'USDT']);
    expect(markets['BTC/USDT']).toMatchObject({
      id: 'BTC-USDT',
      spot: true,
      precision: { amount: 0.000001, price: 0.01 },
    });

    const time = await exchange.fetchTime();
    expect(Math.abs(Number(time) - Date.now())).toBeLessThan(60_000);

    const balance = await exchange.fetchBalance();
    expect(balance.BTC).toMatchObject({ total: 1.5, used: 0.25, free: 1.25 });
    expect(balance.USDT).toMatchObject({ total: 10000, free: 10000 });

    const order = await exchange.createOrder('BTC/USDT', 'limit', 'buy', 0.01, 30000);
    // The JSON body CCXT signed for arrives byte for byte.
    const sent = exchange.last_request_body as string;
    const placed = upstream.received.find((r) => r.method === 'POST' && r.url === '/api/v3/viewer/orders')!;
    expect(placed.body).toBe(sent);
    expect(JSON.parse(sent)).toEqual({
      asset_pair_name: 'BTC-USDT',
      side: 'BID',
      amount: '0.01',
      price: '30000',
      type: 'LIMIT',
    });
    expect(placed.headers['content-type']).toBe('application/json');
    expect(order).toMatchObject({
      symbol: 'BTC/USDT',
      side: 'buy',
      type: 'limit',
      price: 30000,
      amount: 0.01,
      status: 'open',
    });
    expect(order.info.placed_by).toBe('id-trader');

    const cancelled = await exchange.cancelOrder(order.id as string, 'BTC/USDT');
    expect(cancelled).toMatchObject({ id: order.id, status: 'canceled' });
    console.log(
      `[ccxt] markets ${Object.keys(markets).sort().join(', ')}; time ${new Date(Number(time)).toISOString()}; ` +
        `balance BTC ${JSON.stringify(balance.BTC)} USDT ${JSON.stringify(balance.USDT)}; ` +
        `order ${order.id} ${order.side} ${order.amount} ${order.symbol} @ ${order.price} ${order.status}; cancel → ${cancelled.status}`,
    );

    // What the upstream saw: market data without any identity, every signed call with exactly one, never a token.
    const seen = upstream.received.map((r) => [r.method, r.url.split('?')[0], keyIdsOf(r)]);
    // loadMarkets asks for the currencies, the asset pairs and the contract symbols in parallel.
    const loaded = [
      ['GET', '/api/v3/assets', []],
      ['GET', '/api/v3/asset_pairs', []],
      ['GET', '/api/contract/v2/symbols', []],
    ];
    expect(new Set(seen.slice(0, 3).map((x) => JSON.stringify(x)))).toEqual(
      new Set(loaded.map((x) => JSON.stringify(x))),
    );
    expect(seen.slice(3)).toEqual([
      ['GET', '/api/v3/ping', []],
      ['GET', '/api/v3/viewer/accounts', ['id-trader']],
      ['POST', '/api/v3/viewer/orders', ['id-trader']],
      ['POST', `/api/v3/viewer/orders/${order.id}/cancel`, ['id-trader']],
    ]);
    for (const r of upstream.received) expect(r.headers.authorization, r.url).toBeUndefined();
  });

  it('30 parallel signed calls with a strictly increasing nonce: every one passes, each forwarded once with the key', async () => {
    const exchange = withIncreasingNonce(client('parallel', SECRET));
    await exchange.loadMarkets();
    upstream.received.length = 0;
    const results = await Promise.allSettled(Array.from({ length: 30 }, () => exchange.fetchBalance()));
    expect(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))).toEqual([]);
    expect(upstream.received).toHaveLength(30);
    for (const r of upstream.received)
      expect([r.url, keyIdsOf(r)]).toEqual(['/api/v3/viewer/accounts', ['id-parallel']]);
  });

  it("30 parallel signed calls with CCXT's own nonce: calls signed in the same millisecond carry the same token, and all but one are refused as replays", async () => {
    const exchange = client('burst', SECRET);
    await exchange.loadMarkets();
    // Watch the nonces CCXT signs with (its own function, unchanged).
    const own = exchange.nonce.bind(exchange);
    const nonces: string[] = [];
    exchange.nonce = () => {
      const n = own();
      nonces.push(String(n));
      return n;
    };
    upstream.received.length = 0;
    const replaysBefore = await metric('keygate_auth_rejections_total', { code: '40106', reason: 'replay' });
    const results = await Promise.allSettled(Array.from({ length: 30 }, () => exchange.fetchBalance()));
    const distinct = new Set(nonces).size;
    expect(nonces).toHaveLength(30);
    // CCXT's nonce is Date.now() × 10⁶: 30 calls signed back to back share a few milliseconds.
    expect(distinct).toBeLessThan(30);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(results.length - refused.length).toBe(distinct);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(ccxt.ExchangeError);
      expect(String(r.reason)).toContain('"code":40106');
    }
    expect(upstream.received).toHaveLength(distinct);
    // The operator's sign of it: the `replay` reason in the metrics (and in each refusal's log line).
    expect((await metric('keygate_auth_rejections_total', { code: '40106', reason: 'replay' })) - replaysBefore).toBe(
      30 - distinct,
    );
  });

  it('refusals reach CCXT as the errors it maps: missing scope, wrong secret, rate limit', async () => {
    // A key without the `trade` scope places an order: 403 10403 → PermissionDenied.
    const reader = client('reader', SECRET);
    await reader.loadMarkets();
    const denied = await reader.createOrder('BTC/USDT', 'limit', 'buy', 0.01, 30000).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(ccxt.PermissionDenied);
    expect(String(denied)).toContain('"code":10403');

    // A wrong secret: 401 40106 (invalid token), which CCXT reports with the body.
    const wrong = client('trader', 'not-the-secret-0123456789abcdef');
    const invalid = await wrong.fetchBalance().catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(ccxt.ExchangeError);
    expect(String(invalid)).toContain('"code":40106');

    // A key limited to one call a minute: the second gets 429 10429 → RateLimitExceeded.
    const limited = withIncreasingNonce(client('limited', SECRET));
    await limited.loadMarkets();
    await limited.fetchBalance();
    const limitedError = await limited.fetchBalance().catch((e: unknown) => e);
    expect(limitedError).toBeInstanceOf(ccxt.RateLimitExceeded);
    expect(String(limitedError)).toContain('"code":10429');

    // No key: CCXT's signed methods refuse before asking; a private path requested unsigned gets Keygate's 401 40004 → AuthenticationError.
    const anonymous = client();
    await expect(anonymous.fetchBalance()).rejects.toBeInstanceOf(ccxt.AuthenticationError);
    const unsigned = await anonymous.request('viewer/accounts', 'public', 'GET').catch((e: unknown) => e);
    expect(unsigned).toBeInstanceOf(ccxt.AuthenticationError);
    expect(String(unsigned)).toContain('"code":40004');
    for (const [what, e] of [
      ['missing scope', denied],
      ['wrong secret', invalid],
      ['rate limited', limitedError],
      ['unsigned private call', unsigned],
    ] as const) {
      console.log(`[ccxt] ${what}: ${(e as Error).constructor.name}: ${String((e as Error).message).slice(0, 160)}`);
    }

    // The upstream got exactly the calls that passed: the markets, and the limited key's first balance.
    const signed = upstream.received.filter((r) => r.url.startsWith('/api/v3/viewer/'));
    expect(signed.map((r) => [r.method, r.url, keyIdsOf(r)])).toEqual([
      ['GET', '/api/v3/viewer/accounts', ['id-limited']],
    ]);
    expect(upstream.orders.size).toBe(1); // the order of the first test, none from the reader
  });
});
