import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  describeTracing,
  OTEL_SETTING_NAMES,
  readTracing,
  type TracingSettings,
} from '../../src/config/read-tracing.js';
import { repoRoot } from '../helpers/deploy.js';
import { codeSpans, readDoc, section, tableRows } from '../helpers/markdown.js';

const read = (env: Record<string, string>) => {
  const problems: string[] = [];
  const tracing = readTracing(env, problems);
  return { tracing, problems };
};
const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };

describe('readTracing', () => {
  it('is off without an endpoint, and with OTEL_SDK_DISABLED=true', () => {
    expect(read({})).toEqual({ tracing: undefined, problems: [] });
    expect(read({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).toEqual({
      tracing: undefined,
      problems: [],
    });
    expect(read({ ...ENDPOINT, OTEL_SDK_DISABLED: 'true' })).toEqual({ tracing: undefined, problems: [] });
  });

  it('has the specification’s defaults', () => {
    expect(read(ENDPOINT)).toEqual({
      problems: [],
      tracing: {
        endpoint: 'http://collector:4318/v1/traces',
        protocol: 'http/protobuf',
        serviceName: 'keygate',
        resourceAttributes: {},
        sampler: 'parentbased_always_on',
        samplerRatio: 1,
        headers: {},
        batch: { maxQueueSize: 2048, maxExportBatchSize: 512, scheduledDelayMillis: 5000, exportTimeoutMillis: 30000 },
      } satisfies TracingSettings,
    });
  });

  it.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/' }, 'http://c:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://c/otlp' }, 'https://c/otlp/v1/traces'],
    [{ ...ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:9/custom' }, 'http://t:9/custom'],
  ])('the endpoint: %j → %s', (env, endpoint) => {
    expect(read(env).tracing?.endpoint).toBe(endpoint);
  });

  it('reads every setting, the traces-specific ones first', () => {
    const { tracing, problems } = read({
      ...ENDPOINT,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'edge-auth',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,team=a%20b',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.01',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20one,x-a=1',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'authorization=Bearer%20two',
      OTEL_BSP_MAX_QUEUE_SIZE: '100',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '10',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_EXPORT_TIMEOUT: '1000',
    });
    expect(problems).toEqual([]);
    expect(tracing).toMatchObject({
      protocol: 'http/json',
      serviceName: 'edge-auth',
      resourceAttributes: { 'deployment.environment': 'prod', team: 'a b' },
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.01,
      headers: { authorization: 'Bearer two', 'x-a': '1' },
      batch: { maxQueueSize: 100, maxExportBatchSize: 10, scheduledDelayMillis: 200, exportTimeoutMillis: 1000 },
    });
  });

  it('reports every problem together, never a header’s value', () => {
    const { problems } = read({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_TRACES_SAMPLER: 'sometimes',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization',
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x=%E0%A4%A',
      OTEL_BSP_MAX_QUEUE_SIZE: '10',
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '20',
      OTEL_BSP_SCHEDULE_DELAY: 'soon',
      OTEL_SDK_DISABLED: 'maybe',
    });
    expect(problems.map((p) => p.split(':')[0])).toEqual([
      'OTEL_SDK_DISABLED',
      'OTEL_EXPORTER_OTLP_ENDPOINT',
      'OTEL_EXPORTER_OTLP_PROTOCOL',
      'OTEL_TRACES_SAMPLER',
      'OTEL_EXPORTER_OTLP_HEADERS',
      'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
      'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
      'OTEL_BSP_SCHEDULE_DELAY',
    ]);
    expect(problems.join('\n')).not.toContain('%E0');
    expect(read({ ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' }).problems).toEqual([
      'OTEL_TRACES_SAMPLER_ARG: a ratio between 0 and 1, got "2"',
    ]);
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://u:p@c:4318' }).problems).toEqual([
      'OTEL_EXPORTER_OTLP_ENDPOINT: no credentials in the URL; send them in OTEL_EXPORTER_OTLP_HEADERS',
    ]);
  });

  it('describes what tracing will do, the headers by name only', () => {
    const { tracing } = read({
      ...ENDPOINT,
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20s3cr3t',
      OTEL_TRACES_SAMPLER: 'traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    const described = describeTracing(tracing);
    expect(described).toMatchObject({
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      serviceName: 'keygate',
      sampler: 'traceidratio (0.25)',
      headers: ['authorization'],
    });
    expect(JSON.stringify(described)).not.toContain('s3cr3t');
    expect(describeTracing(undefined)).toBe('off');
  });
});

describe('OTEL_SETTING_NAMES', () => {
  it('is every OTEL_* name src/ reads, and every row of the configuration reference’s tracing table', () => {
    const inCode = new Set<string>();
    for (const d of readdirSync(join(repoRoot, 'src'), { recursive: true, withFileTypes: true }))
      if (d.isFile() && d.name.endsWith('.ts'))
        // A name, not a family (`OTEL_BSP_*` in a comment) and not the list's own name.
        for (const m of readFileSync(join(d.parentPath, d.name), 'utf8').matchAll(
          /\bOTEL_[A-Z0-9_]*[A-Z0-9]\b(?!_\*)/g,
        ))
          if (m[0] !== 'OTEL_SETTING_NAMES') inCode.add(m[0]);
    expect([...inCode].sort()).toEqual([...OTEL_SETTING_NAMES].sort());
    const doc = section(readDoc('docs/reference/configuration.md'), 'Tracing variables (OpenTelemetry)');
    const rows = tableRows(doc).flatMap((cells) => codeSpans(cells[0]!).filter((c) => c.startsWith('OTEL_')));
    expect(rows.sort()).toEqual([...OTEL_SETTING_NAMES].sort());
  });
});
