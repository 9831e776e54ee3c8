import type { IncomingMessage, ServerResponse } from 'node:http';

// Hop-by-hop response headers: they describe the upstream connection, not the response.
const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'trailer', 'te']);

/**
 * Copies the upstream's status and end-to-end headers onto the client
 * response. Connection management and framing are left to Node's server, so
 * the client's own `Connection: close` is honoured and the upstream's
 * keep-alive settings never leak to the client. Repeated headers (Set-Cookie)
 * stay repeated; names keep the upstream's spelling.
 */
export function copyResponseHead(upstream: IncomingMessage, res: ServerResponse): void {
  res.statusCode = upstream.statusCode ?? 502;
  if (upstream.statusMessage) res.statusMessage = upstream.statusMessage;
  // Headers the upstream names in Connection are hop-by-hop too; copy the set only then.
  const connection = upstream.headers.connection;
  let dropped = HOP_BY_HOP;
  if (typeof connection === 'string') {
    const named = new Set(HOP_BY_HOP);
    for (const name of connection.split(',')) named.add(name.trim().toLowerCase());
    dropped = named;
  }
  const grouped = new Map<string, { name: string; values: string[] }>();
  const raw = upstream.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const lower = name.toLowerCase();
    if (dropped.has(lower)) continue;
    const entry = grouped.get(lower) ?? { name, values: [] };
    entry.values.push(raw[i + 1] as string);
    grouped.set(lower, entry);
  }
  for (const { name, values } of grouped.values()) res.setHeader(name, values.length === 1 ? (values[0] as string) : values);
}
