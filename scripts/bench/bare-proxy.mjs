// @ts-check
// Baseline: a bare http-proxy with the same keep-alive agent settings as
// Keygate's forwarder (src/gateway/upstream/forwarder.ts) and no authentication.
import { Agent, createServer } from 'node:http';
import httpProxy from 'http-proxy';

const maxSockets = 256;
const agent = new Agent({ keepAlive: true, maxSockets, maxFreeSockets: Math.min(maxSockets, 64), scheduling: 'lifo' });
const proxy = httpProxy.createProxyServer({ target: process.env.UPSTREAM, agent, xfwd: false, changeOrigin: false });
proxy.on('error', (_err, _req, res) => {
  // `res` is a Socket only for WebSocket upgrades, which this hop never proxies.
  if ('statusCode' in res) res.statusCode = 502;
  res.end();
});
const server = createServer((req, res) => proxy.web(req, res));
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  process.stdout.write(`${JSON.stringify({ port })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
