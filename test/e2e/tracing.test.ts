import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH } from '../helpers/constants.js';
import { bearer, send } from '../helpers/http.js';
import { startKeygate, type RunningKeygate } from '../helpers/keygate.js';
import { makeKey } from '../helpers/make-key.js';
import {
  SPAN_KIND,
  STATUS_ERROR,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../helpers/otlp-receiver.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { guard } from '../helpers/slowdown.js';
import { token } from '../helpers/tokens.js';
import { openStream, STREAM_PATH, STREAM_SCOPE, startWsUpstream, writeStreamPolicy } from '../helpers/ws-streams.js';

const API_KEY = 'trace-key-apikey-7f3a';
const SECRET = 'trace-secret-0123456789abcdef-s3cr3t';
const KEY_ID = 'key-traced';
const OWNER = 'acct_traced';
const KEYS = [makeKey({ apiKey: API_KEY, secret: SECRET, id: KEY_ID, owner: OWNER })];

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
const TRACEPARENT_RE = /^00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])$/;

function policyFile(extra = ''): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-trace-'));
  const file = join(dir, 'policy.yaml');
  writeFileSync(
    file,
    `routes:\n  - { method: GET, path: ${ACCOUNTS_PATH}, scopes: [accounts:read], cost: 3 }\n` +
      `  - { method: GET, path: /api/v3/orders/:id, scopes: [accounts:read] }\n${extra}`,
  );
  return file;
}

/** Tracing's variables for a receiver: fast batches, so a test waits milliseconds, not the 5 s default. */
function otelEnv(receiver: OtlpReceiver, protocol: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    OTEL_BSP_SCHEDULE_DELAY: '20',
    OTEL_SERVICE_NAME: 'keygate-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
    ...extra,
  };
}

const upstreamTraceparent = (upstream: RecordingUpstream, i = -1) => {
  const r = upstream.received.at(i);
  const values = [];
  for (let j = 0; j < (r?.rawHeaders.length ?? 0); j += 2)
    if (r!.rawHeaders[j]!.toLowerCase() === 'traceparent') values.push(r!.rawHeaders[j + 1]!);
  return values;
};

/** The spans of one trace once its SERVER span (ended last, with the response) has been exported. */
async function traceOf(receiver: OtlpReceiver, traceId: string): Promise<ReceivedSpan[]> {
  await expect
    .poll(() => receiver.spans.some((s) => s.traceId === traceId && s.kind === SPAN_KIND.SERVER), {
      timeout: guard(10_000),
      interval: 20,
    })
    .toBe(true);
  return receiver.spans.filter((s) => s.traceId === traceId);
}

function everyExportedString(spans: readonly ReceivedSpan[]): string[] {
  const out: string[] = [];
  for (const s of spans) {
    out.push(s.name, ...Object.keys(s.attributes), ...Object.values(s.attributes).map(String));
    for (const e of s.events)
      out.push(e.name, ...Object.keys(e.attributes), ...Object.values(e.attributes).map(String));
    out.push(...Object.values(s.resource).map(String));
  }
  return out;
}

describe.each(['http/json', 'http/protobuf'])('tracing over OTLP %s', (protocol) => {
  let receiver: OtlpReceiver;
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: { KEYGATE_CONFIG: policyFile(), ...otelEnv(receiver, protocol) },
    });
  });
  afterAll(async () => {
    await kg?.close();
    await upstream?.close();
    await receiver?.close();
  });

  it('the SERVER span is the child of the client span, and the upstream gets a traceparent under Keygate', async () => {
    const reply = await send(kg.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token(API_KEY, SECRET)), traceparent: TRACEPARENT, tracestate: 'vendor=abc' },
    });
    expect(reply.status).toBe(200);
    const sent = upstreamTraceparent(upstream);
    expect(sent).toHaveLength(1);
    const [, traceId, parentId, flags] = TRACEPARENT_RE.exec(sent[0]!)!;
    expect(traceId).toBe(CLIENT_TRACE);
    expect(flags).toBe('01');
    expect(upstream.received.at(-1)!.headers.tracestate).toBe('vendor=abc');

    const spans = await traceOf(receiver, CLIENT_TRACE);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const client = spans.find((s) => s.kind === SPAN_KIND.CLIENT && s.attributes['http.request.method'] === 'GET')!;
    expect(server.parentSpanId).toBe(CLIENT_SPAN);
    expect(client.parentSpanId).toBe(server.spanId);
    // The upstream's parent is Keygate's CLIENT span for the exchange.
    expect(parentId).toBe(client.spanId);
    expect(client.attributes['http.response.status_code']).toBe(200);
    // The trace as exported, for the record: caller → Keygate's SERVER span → its CLIENT span → the upstream.
    console.log(
      `[tracing] ${protocol}: trace ${CLIENT_TRACE}: caller span ${CLIENT_SPAN} → SERVER "${server.name}" ${server.spanId}` +
        ` → CLIENT "${client.name}" ${client.spanId} → upstream got traceparent ${sent[0]}`,
    );
    expect(server.name).toBe(`GET ${ACCOUNTS_PATH}`);
    expect(server.contentType).toBe(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    expect(server.attributes).toMatchObject({
      'http.request.method': 'GET',
      'url.path': ACCOUNTS_PATH,
      'http.route': ACCOUNTS_PATH,
      'http.response.status_code': 200,
      'client.address': '127.0.0.1',
      'server.port': kg.port,
      'keygate.code': 'ok',
      'keygate.key_id': KEY_ID,
      'keygate.owner': OWNER,
      'keygate.route_cost': 3,
    });
    expect(server.status).not.toBe(STATUS_ERROR);
    expect(server.resource).toMatchObject({
      'service.name': 'keygate-under-test',
      'deployment.environment': 'test',
    });
    // The request line joins the trace.
    await expect
      .poll(() => kg.logs.find((l) => l.includes(`"trace_id":"${CLIENT_TRACE}"`)), { timeout: guard(5_000) })
      .toContain(`"span_id":"${server.spanId}"`);
  });

  it('the latency histograms carry the sampled trace as an exemplar, in OpenMetrics', async () => {
    const metrics = await send(kg.adminUrl, '/metrics', { headers: { accept: 'application/openmetrics-text' } });
    expect(metrics.headers['content-type']).toMatch(/^application\/openmetrics-text/);
    expect(metrics.body.endsWith('# EOF\n')).toBe(true);
    const exemplar = (name: string) =>
      new RegExp(`^${name}_bucket\\{[^}]*\\} \\d+ # \\{trace_id="${CLIENT_TRACE}"\\} [0-9.e-]+ [0-9.]+$`, 'm');
    expect(metrics.body).toMatch(exemplar('keygate_upstream_duration_seconds'));
    expect(metrics.body).toMatch(exemplar('keygate_auth_duration_seconds'));
  });

  it('a replay (40106) exports an ERROR span with its code and an event carrying the reason', async () => {
    const t = token(API_KEY, SECRET);
    const traceId = 'aaaabbbbccccddddeeeeffff00001111';
    expect((await send(kg.url, ACCOUNTS_PATH, { headers: bearer(t) })).status).toBe(200);
    const replay = await send(kg.url, ACCOUNTS_PATH, {
      headers: { ...bearer(t), traceparent: `00-${traceId}-1111222233334444-01` },
    });
    expect(replay.status).toBe(401);
    const [server] = (await traceOf(receiver, traceId)).filter((s) => s.kind === SPAN_KIND.SERVER);
    expect(server!.status).toBe(STATUS_ERROR);
    expect(server!.attributes).toMatchObject({
      'keygate.code': '40106',
      'keygate.reason': 'replay',
      'keygate.key_id': KEY_ID,
      'http.response.status_code': 401,
    });
    expect(server!.events).toContainEqual({
      name: 'keygate.refused',
      attributes: { 'keygate.code': '40106', 'keygate.reason': 'replay' },
    });
  });

  it('a request without traceparent starts a trace, and the upstream is told of it', async () => {
    const before = upstream.received.length;
    expect((await send(kg.url, ACCOUNTS_PATH, { headers: bearer(token(API_KEY, SECRET)) })).status).toBe(200);
    expect(upstream.received.length).toBe(before + 1);
    const [, traceId, parentId, flags] = TRACEPARENT_RE.exec(upstreamTraceparent(upstream)[0]!)!;
    expect(flags).toBe('01');
    const spans = await traceOf(receiver, traceId!);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    expect(server.parentSpanId).toBe('');
    expect(spans.find((s) => s.spanId === parentId)?.parentSpanId).toBe(server.spanId);
  });

  it('a client that sends two traceparents (invalid) starts a new trace, and the upstream gets only Keygate’s', async () => {
    await send(kg.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token(API_KEY, SECRET)), traceparent: [TRACEPARENT, TRACEPARENT] },
    });
    const sent = upstreamTraceparent(upstream);
    expect(sent).toHaveLength(1);
    expect(sent[0]).not.toContain(CLIENT_TRACE);
  });

  it('no token, secret or API key in any exported name or attribute, on every path including refusals', async () => {
    const good = token(API_KEY, SECRET);
    const paths: Array<[string, Record<string, string>]> = [
      [ACCOUNTS_PATH, bearer(good)], // pass
      [ACCOUNTS_PATH, bearer(good)], // replay
      [ACCOUNTS_PATH, bearer(token(API_KEY, 'wrong-secret-0123456789abcdef'))], // bad signature
      [ACCOUNTS_PATH, bearer(token('unknown-apikey-9', SECRET))], // unknown key
      [ACCOUNTS_PATH, { authorization: `Bearer ${good}x` }], // malformed
      [ACCOUNTS_PATH, {}], // no token
      ['/api/v3/unlisted', bearer(token(API_KEY, SECRET))], // unlisted route
      ['/api/v3/orders/42', bearer(token(API_KEY, SECRET))], // parameterised route
      ['/nowhere', {}], // outside the API
      [`${ACCOUNTS_PATH}?apiKey=${API_KEY}&secret=${SECRET}`, bearer(token(API_KEY, SECRET))], // query
    ];
    const traces: string[] = [];
    for (const [i, [path, headers]] of paths.entries()) {
      const traceId = `${String(i).padStart(2, '0')}${'c'.repeat(30)}`;
      traces.push(traceId);
      await send(kg.url, path, { headers: { ...headers, traceparent: `00-${traceId}-${'d'.repeat(16)}-01` } });
    }
    const spans: ReceivedSpan[] = [];
    for (const t of traces) spans.push(...(await traceOf(receiver, t)));
    const strings = everyExportedString(spans).join('\n');
    for (const secret of [API_KEY, SECRET, good, good.split('.')[2]!, 'unknown-apikey-9', 'wrong-secret'])
      expect(strings).not.toContain(secret);
    // The parameterised route is named by its pattern, never the path's value.
    expect(spans.map((s) => s.name)).toContain('GET /api/v3/orders/:id');
  });
});

describe('sampling off (OTEL_TRACES_SAMPLER=always_off)', () => {
  let receiver: OtlpReceiver;
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: {
        KEYGATE_CONFIG: policyFile(),
        ...otelEnv(receiver, 'http/protobuf', { OTEL_TRACES_SAMPLER: 'always_off' }),
      },
    });
  });
  afterAll(async () => {
    await upstream?.close();
    await receiver?.close();
  });

  it('exports nothing and still propagates: the upstream gets the trace id under Keygate’s span, not sampled', async () => {
    for (let i = 0; i < 5; i++)
      await send(kg.url, ACCOUNTS_PATH, { headers: { ...bearer(token(API_KEY, SECRET)), traceparent: TRACEPARENT } });
    await send(kg.url, ACCOUNTS_PATH, { headers: { traceparent: TRACEPARENT } }); // a refusal too
    const [, traceId, parentId, flags] = TRACEPARENT_RE.exec(upstreamTraceparent(upstream)[0]!)!;
    expect(traceId).toBe(CLIENT_TRACE);
    expect(parentId).not.toBe(CLIENT_SPAN);
    expect(flags).toBe('00');
    // Its parent is the SERVER span the request line names.
    await expect
      .poll(() => kg.logs.some((l) => l.includes(`"span_id":"${parentId}"`)), { timeout: guard(5_000) })
      .toBe(true);
    // No exemplar names a trace that was not sampled.
    expect((await send(kg.adminUrl, '/metrics')).body).not.toContain('trace_id=');
    // Closing flushes what is queued: nothing was.
    await kg.close();
    expect(receiver.exports).toEqual([]);
  });
});

/**
 * The SDK's ratio sampler keeps a trace when the XOR of its trace id's four 32-bit words is below ratio × 2^32, so a
 * client that chooses trace ids XORing to 0 had all its requests sampled. A sampler that does not follow the
 * parent must decide on something the client does not choose: at 1%, 200 such requests keep about 2 (the chance of
 * 20 or more is below 1e-15). The decision is read where it is made: the sampled flag of the upstream's traceparent.
 */
describe('traceidratio: the client does not choose what is sampled', () => {
  let receiver: OtlpReceiver;
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: KEYS,
      env: {
        KEYGATE_CONFIG: policyFile(),
        ...otelEnv(receiver, 'http/protobuf', { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' }),
      },
    });
  });
  afterAll(async () => {
    await kg?.close();
    await upstream?.close();
    await receiver?.close();
  });

  it('trace ids whose words XOR to 0 are kept at the ratio, not always; the trace id is still the client’s', async () => {
    const word = () => Math.floor(Math.random() * 0x1_0000_0000);
    const hex = (n: number) => n.toString(16).padStart(8, '0');
    const n = 200;
    const sent: string[] = [];
    for (let i = 0; i < n; i++) {
      const [a, b, c] = [word(), word(), (word() | 1) >>> 0];
      const traceId = hex(a) + hex(b) + hex(c) + hex((a ^ b ^ c) >>> 0);
      sent.push(traceId);
      const reply = await send(kg.url, ACCOUNTS_PATH, {
        headers: { ...bearer(token(API_KEY, SECRET)), traceparent: `00-${traceId}-${CLIENT_SPAN}-00` },
      });
      expect(reply.status).toBe(200);
    }
    const forwarded = upstream.received
      .slice(-n)
      .map((_, i) => TRACEPARENT_RE.exec(upstreamTraceparent(upstream, i - n)[0]!)!);
    expect(forwarded.map((m) => m[1])).toEqual(sent);
    const sampled = forwarded.filter((m) => m[3] === '01').length;
    console.log(`[tracing] traceidratio 0.01: ${sampled} of ${n} client-chosen trace ids sampled`);
    expect(sampled).toBeLessThan(20);
  });
});

describe('forward-auth mode', () => {
  let receiver: OtlpReceiver;
  let kg: RunningKeygate;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    kg = await startKeygate({
      upstream: 'http://unused.invalid',
      keys: KEYS,
      env: {
        KEYGATE_MODE: 'forward-auth',
        KEYGATE_CONFIG: policyFile('trustedProxies: [127.0.0.1/32]\n'),
        ...otelEnv(receiver, 'http/json'),
      },
    });
  });
  afterAll(async () => {
    await kg?.close();
    await receiver?.close();
  });

  it('makes the SERVER span for the check, the child of nginx’s traceparent, named by the original route', async () => {
    const nginxSpan = '0123456789abcdef';
    const traceId = 'f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0';
    const reply = await send(kg.url, '/auth', {
      headers: {
        ...bearer(token(API_KEY, SECRET)),
        'x-original-method': 'GET',
        'x-original-uri': ACCOUNTS_PATH,
        traceparent: `00-${traceId}-${nginxSpan}-01`,
      },
    });
    expect(reply.status).toBe(200);
    const spans = await traceOf(receiver, traceId);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    expect(server.parentSpanId).toBe(nginxSpan);
    expect(server.name).toBe(`GET ${ACCOUNTS_PATH}`);
    expect(server.attributes).toMatchObject({
      'keygate.code': 'ok',
      'keygate.key_id': KEY_ID,
      'url.path': ACCOUNTS_PATH,
    });
    // Nothing is forwarded, so there is no upstream CLIENT span.
    expect(spans.filter((s) => s.kind === SPAN_KIND.CLIENT)).toEqual([]);

    const refused = 'e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0';
    await send(kg.url, '/auth', {
      headers: {
        'x-original-method': 'GET',
        'x-original-uri': ACCOUNTS_PATH,
        traceparent: `00-${refused}-${nginxSpan}-01`,
      },
    });
    const [refusal] = await traceOf(receiver, refused);
    expect(refusal!.status).toBe(STATUS_ERROR);
    expect(refusal!.parentSpanId).toBe(nginxSpan);
  });
});

describe('with Redis: the admit round trip', () => {
  let redis: TestRedis;
  let receiver: OtlpReceiver;
  let upstream: RecordingUpstream;
  let kg: RunningKeygate;
  beforeAll(async () => {
    redis = await startRedis({ shared: true });
    await redis.flush();
    receiver = await startOtlpReceiver();
    upstream = await startRecordingUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      redisUrl: redis.url,
      keys: KEYS,
      env: { KEYGATE_CONFIG: policyFile(), ...otelEnv(receiver, 'http/protobuf') },
    });
  });
  afterAll(async () => {
    await kg?.close();
    await upstream?.close();
    await receiver?.close();
    await redis?.stop();
  });

  it('gets a CLIENT span under the SERVER span', async () => {
    const traceId = '12121212121212121212121212121212';
    const reply = await send(kg.url, ACCOUNTS_PATH, {
      headers: { ...bearer(token(API_KEY, SECRET)), traceparent: `00-${traceId}-${CLIENT_SPAN}-01` },
    });
    expect(reply.status).toBe(200);
    const spans = await traceOf(receiver, traceId);
    const server = spans.find((s) => s.kind === SPAN_KIND.SERVER)!;
    const admit = spans.find((s) => s.name === 'redis admit')!;
    expect(admit.kind).toBe(SPAN_KIND.CLIENT);
    expect(admit.parentSpanId).toBe(server.spanId);
    expect(admit.attributes['db.system.name']).toBe('redis');
  });

  // A CLIENT span stands for a round trip that happened: a request refused before the admit has none.
  it.each([
    ['missing_header', '21', () => ({})],
    ['bad_header_format', '22', () => ({ authorization: 'Basic abc' })],
    ['malformed', '23', () => ({ authorization: 'Bearer not-a-token' })],
    ['bad_signature', '24', () => bearer(token(API_KEY, 'not-the-secret-0123456789abcdef'))],
    ['unknown_key', '25', () => bearer(token('no-such-key-apikey', SECRET))],
  ])('a request refused before the admit (%s) has no redis admit span', async (reason, tag, headers) => {
    const traceId = tag.repeat(16);
    const reply = await send(kg.url, ACCOUNTS_PATH, {
      headers: { ...headers(), traceparent: `00-${traceId}-${CLIENT_SPAN}-01` },
    });
    expect(reply.status).toBeGreaterThanOrEqual(400);
    const spans = await traceOf(receiver, traceId);
    expect(spans.find((s) => s.kind === SPAN_KIND.SERVER)?.attributes['keygate.reason']).toBe(reason);
    expect(spans.map((s) => s.name)).not.toContain('redis admit');
    expect(spans.filter((s) => s.kind === SPAN_KIND.CLIENT)).toEqual([]);
  });
});

describe('WebSocket streams', () => {
  let receiver: OtlpReceiver;
  let upstream: Awaited<ReturnType<typeof startWsUpstream>>;
  let kg: RunningKeygate;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    upstream = await startWsUpstream();
    kg = await startKeygate({
      upstream: upstream.url,
      keys: [makeKey({ apiKey: 'streamer', secret: SECRET, id: 'key-streamer', scopes: [STREAM_SCOPE] })],
      env: { KEYGATE_CONFIG: writeStreamPolicy(), ...otelEnv(receiver, 'http/json') },
    });
  });
  afterAll(async () => {
    await upstream?.close();
    await receiver?.close();
  });

  it('the upgrade is one span that lasts the stream, and ends with the event of Keygate closing it', async () => {
    const traceId = '5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a';
    const stream = await openStream(kg.url, 'streamer', SECRET, STREAM_PATH, {
      traceparent: `00-${traceId}-${CLIENT_SPAN}-01`,
    });
    await expect.poll(() => upstream.connections.length).toBe(1);
    // The upstream's handshake carries Keygate's trace context.
    expect(upstream.connections[0]!.headers.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    // Open stream: its span has not ended, so nothing of it is exported yet but the upstream exchange.
    await expect.poll(() => receiver.spans.some((s) => s.traceId === traceId)).toBe(true);
    expect(receiver.spans.filter((s) => s.traceId === traceId && s.kind === SPAN_KIND.SERVER)).toEqual([]);
    // Shutdown closes the stream (1001), and flushes the span.
    await kg.close();
    expect((await stream.closed).code).toBe(1001);
    const [server] = (await traceOf(receiver, traceId)).filter((s) => s.kind === SPAN_KIND.SERVER);
    expect(server!.parentSpanId).toBe(CLIENT_SPAN);
    expect(server!.attributes).toMatchObject({ 'http.response.status_code': 101, 'keygate.key_id': 'key-streamer' });
    expect(server!.events).toContainEqual({
      name: 'keygate.stream.closed',
      attributes: { 'keygate.stream.close_reason': 'shutdown', 'keygate.stream.closed_by': 'keygate' },
    });
  });
});
