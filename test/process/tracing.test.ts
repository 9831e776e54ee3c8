import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNTS_PATH, DEMO_KEY, DEMO_SECRET } from '../helpers/constants.js';
import { repoRoot } from '../helpers/deploy.js';
import { freePort } from '../helpers/free-port.js';
import { bearer, send } from '../helpers/http.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.js';
import { runKeygate, serveKeygate } from '../helpers/spawn-keygate.js';
import { token } from '../helpers/tokens.js';

const RECORDER = pathToFileURL(join(repoRoot, 'scripts/harness/record-modules.mjs')).href;
/** Every OTEL_* variable the runner's own environment might carry is removed: tracing is off unless set here. */
const NO_OTEL = Object.fromEntries(
  Object.keys(process.env)
    .filter((n) => n.startsWith('OTEL_'))
    .map((n) => [n, undefined]),
);

// Valid W3C syntax is not Keygate's to judge while tracing is off: upper-case hex (invalid), a field name
// in mixed case and blanks inside tracestate all reach the upstream exactly as sent.
const TRACEPARENT = '00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01';
const TRACESTATE = 'congo=t61rcWkgMzE,  rojo=00f067aa0ba902b7';

/** `keygate serve` with the module recorder preloaded; the modules it loaded once it has exited. */
async function served(upstream: RecordingUpstream, env: Record<string, string | undefined>) {
  const file = join(mkdtempSync(join(tmpdir(), 'keygate-modules-')), 'modules.txt');
  const gate = await serveKeygate({
    ...NO_OTEL,
    KEYGATE_UPSTREAM: upstream.url,
    KEYGATE_KEYS_FILE: join(repoRoot, 'examples/demo-keys.yaml'),
    NODE_OPTIONS: `--import=${RECORDER}`,
    RECORD_MODULES_FILE: file,
    ...env,
  });
  const reply = await send(gate.url, ACCOUNTS_PATH, {
    headers: { ...bearer(token(DEMO_KEY, DEMO_SECRET)), TraceParent: TRACEPARENT, tracestate: TRACESTATE },
  });
  expect(reply.status).toBe(200);
  await gate.stop();
  return readFileSync(file, 'utf8').split('\n').filter(Boolean);
}

const valuesOf = (raw: readonly string[], name: string) =>
  raw.flatMap((v, i) => (i % 2 === 0 && v.toLowerCase() === name ? [`${v}: ${raw[i + 1]}`] : []));

describe('tracing off (no OTLP endpoint set)', () => {
  let upstream: RecordingUpstream;
  beforeAll(async () => {
    upstream = await startRecordingUpstream();
  });
  afterAll(() => upstream?.close());

  it('loads no OpenTelemetry module, and passes traceparent and tracestate through byte for byte', async () => {
    const modules = await served(upstream, {});
    // The recorder saw Keygate's own modules and the CommonJS packages it requires: it works.
    expect(modules.some((m) => m.endsWith('/dist/create-keygate.js'))).toBe(true);
    expect(modules.some((m) => m.includes('/node_modules/pino/'))).toBe(true);
    // prom-client's default process metrics require the no-op @opentelemetry/api (for exemplars), with or
    // without tracing, as before tracing existed; no other OpenTelemetry package and none of Keygate's tracing.
    const otel = modules.filter((m) => m.includes('opentelemetry') || m.includes('otel-tracing'));
    expect(otel.filter((m) => !m.includes('/node_modules/@opentelemetry/api/'))).toEqual([]);
    const raw = upstream.received.at(-1)!.rawHeaders;
    expect(valuesOf(raw, 'traceparent')).toEqual([`TraceParent: ${TRACEPARENT}`]);
    expect(valuesOf(raw, 'tracestate')).toEqual([`tracestate: ${TRACESTATE}`]);
  });

  it('control: with an endpoint set the same check sees the packages, and Keygate’s own traceparent upstream', async () => {
    // Nothing listens there: the exports fail, counted, and serving is unaffected.
    const modules = await served(upstream, { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${await freePort()}` });
    expect(modules.some((m) => m.includes('/node_modules/@opentelemetry/sdk-trace-base/'))).toBe(true);
    expect(modules.some((m) => m.endsWith('/dist/observe/tracing/otel-tracing.js'))).toBe(true);
    const [sent] = valuesOf(upstream.received.at(-1)!.rawHeaders, 'traceparent');
    // The client's (upper-case hex: not valid W3C) is replaced by a new trace of Keygate's.
    expect(sent).toMatch(/^traceparent: 00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(sent?.toUpperCase()).not.toContain('4BF92F3577B34DA6A3CE929D0E0E4736');
  });
});

describe('keygate check-config with tracing', () => {
  const base = { ...NO_OTEL, KEYGATE_UPSTREAM: 'http://127.0.0.1:9', KEYGATE_REDIS_URL: undefined };

  it('shows what tracing will do, the export headers by name only', async () => {
    const { stdout } = await runKeygate(['check-config'], {
      ...base,
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20hidden-credential',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.05',
      OTEL_SERVICE_NAME: 'edge-auth',
    });
    expect(JSON.parse(stdout.slice(stdout.indexOf('{')))).toMatchObject({
      tracing: {
        endpoint: 'http://collector:4318/v1/traces',
        protocol: 'http/json',
        serviceName: 'edge-auth',
        sampler: 'parentbased_traceidratio (0.05)',
        headers: ['authorization'],
      },
    });
    expect(stdout).not.toContain('hidden-credential');
    expect(JSON.parse((await runKeygate(['check-config'], base)).stdout.replace(/^[^{]*/, ''))).toMatchObject({
      tracing: 'off',
    });
  });

  it('lists a bad tracing setting beside every other problem', async () => {
    const failed = await runKeygate(['check-config'], {
      ...base,
      KEYGATE_PORT: 'eighty',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
    }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number | null; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain('KEYGATE_PORT');
    expect(failed.stderr).toContain('OTEL_EXPORTER_OTLP_PROTOCOL: one of http/protobuf, http/json, got "grpc"');
  });
});
