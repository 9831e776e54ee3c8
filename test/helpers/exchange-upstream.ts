import type { IncomingMessage, ServerResponse } from 'node:http';
import { startRecordingUpstream, type RecordingUpstream } from './recording-upstream.js';

/**
 * A recording upstream that answers the way the exchange API behind the
 * contract does (BigONE v3, https://open.big.one/docs/): `{"code":0,"data":…}`
 * on /api/v3/, a bare list on /api/contract/v2/symbols. It knows two spot
 * markets, keeps the orders it is sent, and echoes the X-Api-Key-Id it got in
 * each order, so a test sees which identity the upstream acted for.
 */
export async function startExchangeUpstream(): Promise<
  RecordingUpstream & { readonly orders: Map<string, Record<string, unknown>> }
> {
  const up = await startRecordingUpstream();
  const orders = new Map<string, Record<string, unknown>>();
  let nextId = 1000;
  const reply = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  // The recording upstream calls the handler when the headers arrive; orders need the whole body.
  up.handler = (req, res, received) => req.on('end', () => answer(req, res, received.body));
  const answer = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const route = `${req.method} ${url.pathname}`;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    let m: RegExpExecArray | null;
    if (route === 'GET /api/v3/ping') {
      // The live API capitalises the field (CCXT reads "Timestamp"); nanoseconds since the epoch.
      return reply(res, 200, { data: { Timestamp: Date.now() * 1_000_000 } });
    }
    if (route === 'GET /api/v3/asset_pairs') {
      return reply(res, 200, {
        code: 0,
        data: [pair('BTC', 'Bitcoin', 'USDT', 'TetherUS', 6, 2), pair('ETH', 'Ethereum', 'USDT', 'TetherUS', 4, 2)],
      });
    }
    if (route === 'GET /api/v3/assets') {
      return reply(res, 200, {
        code: '0',
        message: '',
        data: [asset('BTC', 'Bitcoin', 8), asset('ETH', 'Ethereum', 8), asset('USDT', 'TetherUS', 6)],
      });
    }
    if (route === 'GET /api/contract/v2/symbols') {
      return reply(res, 200, [
        {
          baseCurrency: 'BTC',
          multiplier: 1,
          enable: true,
          priceStep: 0.5,
          maxRiskLimit: 1000,
          pricePrecision: 1,
          maintenanceMargin: 0.005,
          symbol: 'BTCUSD',
          valuePrecision: 4,
          minRiskLimit: 100,
          riskLimit: 100,
          isInverse: true,
          riskStep: 1,
          settleCurrency: 'BTC',
          baseName: 'Bitcoin',
          feePrecision: 8,
          priceMin: 0.5,
          priceMax: 1e6,
          initialMargin: 0.01,
          quoteCurrency: 'USD',
        },
      ]);
    }
    if (route === 'GET /api/v3/viewer/accounts') {
      return reply(res, 200, {
        code: 0,
        data: [
          { asset_symbol: 'BTC', balance: '1.5', locked_balance: '0.25' },
          { asset_symbol: 'USDT', balance: '10000', locked_balance: '0' },
        ],
      });
    }
    if (route === 'POST /api/v3/viewer/orders') {
      let request: Record<string, unknown>;
      try {
        request = JSON.parse(body) as Record<string, unknown>;
      } catch {
        return reply(res, 400, { code: 10001, message: 'syntax error' });
      }
      const order = {
        id: String(nextId++),
        asset_pair_name: request.asset_pair_name,
        price: request.price ?? '0',
        amount: request.amount,
        filled_amount: '0',
        avg_deal_price: '0',
        side: request.side,
        state: 'PENDING',
        created_at: now,
        updated_at: now,
        type: request.type,
        stop_price: '0',
        immediate_or_cancel: false,
        post_only: false,
        client_order_id: '',
        // Not in the real API: lets the test see whom the upstream acted for.
        placed_by: req.headers['x-api-key-id'] ?? null,
      };
      orders.set(order.id, order);
      return reply(res, 200, { code: 0, data: order });
    }
    if (req.method === 'POST' && (m = /^\/api\/v3\/viewer\/orders\/([^/]+)\/cancel$/.exec(url.pathname))) {
      const order = orders.get(decodeURIComponent(m[1] as string));
      if (!order) return reply(res, 404, { code: 10013, message: 'Resource not found' });
      order.state = 'CANCELLED';
      order.updated_at = now;
      return reply(res, 200, { code: 0, data: order });
    }
    return reply(res, 404, { code: 10013, message: 'Resource not found' });
  };
  return Object.assign(up, { orders });
}

function pair(base: string, baseName: string, quote: string, quoteName: string, baseScale: number, quoteScale: number) {
  return {
    id: `pair-${base}-${quote}`,
    name: `${base}-${quote}`,
    quote_scale: quoteScale,
    quote_asset: { id: `asset-${quote}`, symbol: quote, name: quoteName },
    base_asset: { id: `asset-${base}`, symbol: base, name: baseName },
    base_scale: baseScale,
    min_quote_value: '1',
    max_quote_value: '1000000',
  };
}

function asset(symbol: string, name: string, scale: number) {
  return {
    uuid: `asset-${symbol}`,
    symbol,
    name,
    scale,
    is_fiat: false,
    is_transfer_enabled: true,
    transfer_scale: scale,
    binding_gateways: [],
  };
}
