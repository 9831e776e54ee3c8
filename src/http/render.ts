import type { ServerResponse } from 'node:http';
import { ERRORS, type ErrorCode } from '../errors.js';

// Bodies are fixed per code: build them once.
const BODIES = new Map<ErrorCode, Buffer>(
  (Object.keys(ERRORS) as unknown as ErrorCode[]).map((c) => {
    const code = Number(c) as ErrorCode;
    return [code, Buffer.from(JSON.stringify({ code, message: ERRORS[code].message }))];
  }),
);

/** The only place an error becomes an HTTP response. */
export function renderError(res: ServerResponse, code: ErrorCode, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = BODIES.get(code) as Buffer;
  res.statusCode = ERRORS[code].status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', body.length);
  res.setHeader('cache-control', 'no-store');
  if (extraHeaders) for (const [k, v] of Object.entries(extraHeaders)) res.setHeader(k, v);
  res.end(body);
}
