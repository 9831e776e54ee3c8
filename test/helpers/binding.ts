import { createHash } from 'node:crypto';
import { createToken, type TokenBinding } from '../../src/client/create-token.js';
import { makeKey } from './make-key.js';
import { writePolicyFile } from './gate.js';

/** What the binding tests (issue 43) share: a policy, two keys (binding off and required), tokens, raw requests. */
export const SECRET = 'binding-secret-0123456789abcdef';
export const MAX = 4096;
export const ORDERS = '/api/v3/orders';
export const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('base64url');
export const policyFile = writePolicyFile;
export const POLICY = `
routes:
  - { method: [GET, POST, DELETE], path: ${ORDERS}, scopes: [orders] }
  - { method: [GET, PUT], path: ${ORDERS}/:id, scopes: [orders] }
trustedProxies: [127.0.0.1/32]
`;
export const KEYS = [
  makeKey({ apiKey: 'open', id: 'key-open', secret: SECRET, scopes: ['orders'] }),
  makeKey({ apiKey: 'strict', id: 'key-strict', secret: SECRET, scopes: ['orders'], binding: 'required' }),
];

export const mint = (apiKey: string, bind?: TokenBinding) =>
  createToken({ apiKey, apiSecret: SECRET, ...(bind && { bind }) });

/** A raw HTTP/1.1 request: the exact bytes of the target and the body, as a client sends them. */
export function raw(
  method: string,
  target: string,
  token: string,
  head: string[] = [],
  body: Buffer | string = '',
): Buffer {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: keygate', `Authorization: Bearer ${token}`, ...head];
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(body)]);
}
