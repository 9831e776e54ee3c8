import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * The OpenTelemetry protocol's own definitions, from npm: the protobufjs module generated from
 * opentelemetry-proto that @opentelemetry/otlp-transformer shipped (installed under the alias
 * otlp-proto-definitions; the current transformer encodes by hand and ships no definitions).
 */
const root = createRequire(import.meta.url)('otlp-proto-definitions/build/src/generated/root.js') as {
  opentelemetry: {
    proto: {
      collector: {
        trace: {
          v1: {
            ExportTraceServiceRequest: {
              decode(bytes: Uint8Array): unknown;
              toObject(message: unknown, options: Record<string, unknown>): unknown;
            };
          };
        };
      };
    };
  };
};
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/** OTLP's SpanKind and Status codes. */
export const SPAN_KIND = { SERVER: 2, CLIENT: 3 } as const;
export const STATUS_ERROR = 2;

export type AttrValue = string | number | boolean;

/** One exported span, flattened: ids in hex, attributes as plain values. */
export interface ReceivedSpan {
  readonly name: string;
  readonly kind: number;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly attributes: Readonly<Record<string, AttrValue>>;
  readonly status: number;
  readonly events: ReadonlyArray<{ name: string; attributes: Readonly<Record<string, AttrValue>> }>;
  readonly resource: Readonly<Record<string, AttrValue>>;
  /** How the export reached the receiver. */
  readonly contentType: string;
}

export interface OtlpReceiver {
  /** The base endpoint (OTEL_EXPORTER_OTLP_ENDPOINT); traces are POSTed to /v1/traces under it. */
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  /** Export requests received, by content type. */
  readonly exports: string[];
  close(): Promise<void>;
}

type AnyValue = {
  stringValue?: string;
  intValue?: number | string | { toNumber(): number };
  doubleValue?: number;
  boolValue?: boolean;
};
type KeyValue = { key: string; value: AnyValue };

function value(v: AnyValue): AttrValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.intValue !== undefined) return typeof v.intValue === 'object' ? v.intValue.toNumber() : Number(v.intValue);
  return JSON.stringify(v);
}
const attrs = (list: KeyValue[] | undefined) => Object.fromEntries((list ?? []).map((kv) => [kv.key, value(kv.value)]));
/** OTLP/JSON writes ids as hex (the JSON mapping's exception); protobuf carries bytes. */
const hex = (id: unknown) =>
  id === undefined || id === null
    ? ''
    : typeof id === 'string'
      ? id.toLowerCase()
      : Buffer.from(id as Uint8Array).toString('hex');

interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        name: string;
        kind: number;
        traceId: unknown;
        spanId: unknown;
        parentSpanId?: unknown;
        attributes?: KeyValue[];
        status?: { code?: number };
        events?: Array<{ name: string; attributes?: KeyValue[] }>;
      }>;
    }>;
  }>;
}

/** A real OTLP/HTTP receiver (what a Collector listens on, port 4318): accepts JSON and protobuf exports. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const exports: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const contentType = String(req.headers['content-type'] ?? '');
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      exports.push(contentType);
      const request = (
        contentType.startsWith('application/json')
          ? JSON.parse(body.toString('utf8'))
          : ExportTraceServiceRequest.toObject(ExportTraceServiceRequest.decode(body), {
              longs: Number,
              defaults: false,
            })
      ) as ExportRequest;
      for (const rs of request.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? [])
          for (const s of ss.spans ?? [])
            spans.push({
              name: s.name,
              kind: s.kind,
              traceId: hex(s.traceId),
              spanId: hex(s.spanId),
              parentSpanId: hex(s.parentSpanId),
              attributes: attrs(s.attributes),
              status: s.status?.code ?? 0,
              events: (s.events ?? []).map((e) => ({ name: e.name, attributes: attrs(e.attributes) })),
              resource: attrs(rs.resource?.attributes),
              contentType,
            });
      res.writeHead(200, { 'content-type': contentType || 'application/json' });
      res.end(contentType.startsWith('application/json') ? '{}' : '');
    });
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    exports,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
