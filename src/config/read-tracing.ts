import type { Env } from './read-env-int.js';
import { readEnvInt } from './read-env-int.js';

/** The samplers of the OpenTelemetry specification that OTEL_TRACES_SAMPLER may name. */
export const SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLERS)[number];
export const PROTOCOLS = ['http/protobuf', 'http/json'] as const;
export type TraceProtocol = (typeof PROTOCOLS)[number];

/**
 * Tracing (OpenTelemetry), on only when an OTLP endpoint is set. Read from the standard OTEL_* variables,
 * so the values a platform already sets for every other service apply to Keygate unchanged.
 */
export interface TracingSettings {
  /** Where spans are POSTed: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as given, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly endpoint: string;
  readonly protocol: TraceProtocol;
  readonly serviceName: string;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly sampler: SamplerName;
  /** The ratio of the *traceidratio samplers (OTEL_TRACES_SAMPLER_ARG), 0..1. */
  readonly samplerRatio: number;
  /**
   * Sent with every export (OTEL_EXPORTER_OTLP_HEADERS, then _TRACES_HEADERS). Often a credential:
   * only their names are ever shown (describeConfig).
   */
  readonly headers: Readonly<Record<string, string>>;
  /** The batch span processor (OTEL_BSP_*): the queue is bounded, what does not fit is dropped and counted. */
  readonly batch: {
    readonly maxQueueSize: number;
    readonly maxExportBatchSize: number;
    readonly scheduledDelayMillis: number;
    readonly exportTimeoutMillis: number;
  };
}

/**
 * OTEL_* variables Keygate reads. They are the platform's, not Keygate's: a misspelt one is not reported
 * (other software in the same environment reads names Keygate does not), but each is documented.
 */
export const OTEL_SETTING_NAMES: readonly string[] = [
  'OTEL_SDK_DISABLED',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_EXPORTER_OTLP_TRACES_HEADERS',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_BSP_MAX_QUEUE_SIZE',
  'OTEL_BSP_MAX_EXPORT_BATCH_SIZE',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_BSP_EXPORT_TIMEOUT',
];

/** Tracing's settings, or undefined (off: no endpoint set, or OTEL_SDK_DISABLED=true). Problems are recorded, never thrown. */
export function readTracing(env: Env, problems: string[]): TracingSettings | undefined {
  const disabled = (env.OTEL_SDK_DISABLED || 'false').trim().toLowerCase();
  if (disabled !== 'true' && disabled !== 'false')
    problems.push(`OTEL_SDK_DISABLED: "true" or "false", got ${JSON.stringify(env.OTEL_SDK_DISABLED)}`);
  const traces = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || undefined;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;
  if ((traces === undefined && base === undefined) || disabled === 'true') return undefined;

  let endpoint = '';
  const name = traces !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT';
  const raw = (traces ?? base) as string;
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('scheme');
    if (url.username || url.password) {
      problems.push(`${name}: no credentials in the URL; send them in OTEL_EXPORTER_OTLP_HEADERS`);
    }
    // The signal path is appended to the base endpoint only (the specification's rule); the traces one is used as is.
    endpoint = traces !== undefined ? url.href : `${url.href.replace(/\/+$/, '')}/v1/traces`;
  } catch {
    problems.push(`${name}: an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  }

  const protocolName = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocolRaw = env[protocolName] || 'http/protobuf';
  const protocol = (PROTOCOLS as readonly string[]).includes(protocolRaw) ? (protocolRaw as TraceProtocol) : undefined;
  if (protocol === undefined)
    problems.push(`${protocolName}: one of ${PROTOCOLS.join(', ')}, got ${JSON.stringify(protocolRaw)}`);

  const serviceName = env.OTEL_SERVICE_NAME || 'keygate';
  const resourceAttributes = readPairs(env, 'OTEL_RESOURCE_ATTRIBUTES', problems);

  const samplerRaw = (env.OTEL_TRACES_SAMPLER || 'parentbased_always_on').trim();
  const sampler = (SAMPLERS as readonly string[]).includes(samplerRaw) ? (samplerRaw as SamplerName) : undefined;
  if (sampler === undefined)
    problems.push(`OTEL_TRACES_SAMPLER: one of ${SAMPLERS.join(', ')}, got ${JSON.stringify(samplerRaw)}`);
  let samplerRatio = 1;
  const argRaw = env.OTEL_TRACES_SAMPLER_ARG;
  if (argRaw !== undefined && argRaw !== '' && sampler !== undefined && sampler.endsWith('traceidratio')) {
    const n = Number(argRaw.trim());
    if (!/^[0-9.]+$/.test(argRaw.trim()) || !(n >= 0 && n <= 1))
      problems.push(`OTEL_TRACES_SAMPLER_ARG: a ratio between 0 and 1, got ${JSON.stringify(argRaw)}`);
    else samplerRatio = n;
  }

  const headers = {
    ...readPairs(env, 'OTEL_EXPORTER_OTLP_HEADERS', problems),
    ...readPairs(env, 'OTEL_EXPORTER_OTLP_TRACES_HEADERS', problems),
  };

  // The specification's defaults.
  const maxQueueSize = readEnvInt(env, 'OTEL_BSP_MAX_QUEUE_SIZE', 2048, 1, 1_000_000, problems);
  const maxExportBatchSize = readEnvInt(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1, 1_000_000, problems);
  if (maxExportBatchSize > maxQueueSize)
    problems.push(
      `OTEL_BSP_MAX_EXPORT_BATCH_SIZE: at most OTEL_BSP_MAX_QUEUE_SIZE (${maxQueueSize}), got ${maxExportBatchSize}`,
    );
  const scheduledDelayMillis = readEnvInt(env, 'OTEL_BSP_SCHEDULE_DELAY', 5000, 1, 3_600_000, problems);
  const exportTimeoutMillis = readEnvInt(env, 'OTEL_BSP_EXPORT_TIMEOUT', 30000, 1, 3_600_000, problems);

  return {
    endpoint,
    protocol: protocol ?? 'http/protobuf',
    serviceName,
    resourceAttributes,
    sampler: sampler ?? 'parentbased_always_on',
    samplerRatio,
    headers,
    batch: { maxQueueSize, maxExportBatchSize, scheduledDelayMillis, exportTimeoutMillis },
  };
}

/** `key=value,key=value`, values percent-decoded (the W3C Baggage form the specification gives these variables). */
function readPairs(env: Env, name: string, problems: string[]): Record<string, string> {
  const raw = env[name];
  const out: Record<string, string> = {};
  if (raw === undefined || raw.trim() === '') return out;
  for (const part of raw.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq > 0 ? part.slice(0, eq).trim() : '';
    let value: string | undefined;
    try {
      value = eq > 0 ? decodeURIComponent(part.slice(eq + 1).trim()) : undefined;
    } catch {
      value = undefined;
    }
    // Never the value in the message: headers carry credentials.
    if (key === '' || value === undefined || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(key)) {
      problems.push(`${name}: each entry is key=value (percent-encoded value), comma-separated; one is not`);
      return {};
    }
    out[key] = value;
  }
  return out;
}

/** What check-config and the startup line show: everything but the headers' values. */
export function describeTracing(t: TracingSettings | undefined): Record<string, unknown> | 'off' {
  if (t === undefined) return 'off';
  return {
    endpoint: t.endpoint,
    protocol: t.protocol,
    serviceName: t.serviceName,
    ...(Object.keys(t.resourceAttributes).length > 0 && { resourceAttributes: t.resourceAttributes }),
    sampler: t.sampler.endsWith('traceidratio') ? `${t.sampler} (${t.samplerRatio})` : t.sampler,
    headers: Object.keys(t.headers),
    batch: t.batch,
  };
}
