import { deny, type Denial } from '../../errors.js';
import { acceptFor, isWebSocketKey } from './ws-frames.js';

/** What Keygate needs from a client's WebSocket handshake to check the upstream's answer against it. */
export interface UpgradeRequest {
  readonly ok: true;
  readonly key: string;
  /** Sub-protocols the client offered (Sec-WebSocket-Protocol), in its order. */
  readonly protocols: readonly string[];
  /** Whether the client offered any extension: the upstream may answer with one only then. */
  readonly extensions: boolean;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** An extension list as RFC 6455 §9.1 writes it: tokens, `;` parameters, `=` values, commas, spaces, quotes. */
const EXTENSIONS = /^[!#$%&'*+\-.^_`|~0-9A-Za-z ;=,"\t]+$/;

/**
 * The client's handshake (RFC 6455 §4.1), from the raw header list: exactly one `Upgrade: websocket`,
 * one well-formed Sec-WebSocket-Key and `Sec-WebSocket-Version: 13`. Anything else (another protocol such
 * as h2c, a repeated or malformed field) is refused before authentication: it could never be relayed.
 */
export function checkUpgradeRequest(raw: readonly string[]): UpgradeRequest | Denial {
  let upgrade: string | undefined;
  let key: string | undefined;
  let version: string | undefined;
  let repeated = false;
  const protocols: string[] = [];
  let extensions = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = (raw[i + 1] as string).trim();
    if (name === 'upgrade') {
      repeated ||= upgrade !== undefined;
      upgrade = value;
    } else if (name === 'sec-websocket-key') {
      repeated ||= key !== undefined;
      key = value;
    } else if (name === 'sec-websocket-version') {
      repeated ||= version !== undefined;
      version = value;
    } else if (name === 'sec-websocket-protocol') {
      for (const p of value.split(',')) if (p.trim() !== '') protocols.push(p.trim());
    } else if (name === 'sec-websocket-extensions') extensions = true;
  }
  if (
    repeated ||
    upgrade?.toLowerCase() !== 'websocket' ||
    key === undefined ||
    !isWebSocketKey(key) ||
    version !== '13' ||
    protocols.some((p) => !TOKEN.test(p))
  )
    return deny('bad_upgrade');
  return { ok: true, key, protocols, extensions };
}

/**
 * The head Keygate writes to the upstream: the request line with the checked target byte for byte, the
 * header list forward-headers.ts chose (identity headers Keygate's own), then the two hop-by-hop fields of
 * the handshake, which Keygate sets itself. Header values are written back as the bytes the parser read.
 */
export function upgradeRequestHead(target: string, headers: readonly string[]): Buffer {
  let head = `GET ${target} HTTP/1.1\r\n`;
  for (let i = 0; i < headers.length; i += 2) head += `${headers[i] as string}: ${headers[i + 1] as string}\r\n`;
  head += 'Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n';
  return Buffer.from(head, 'latin1');
}

const STATUS_LINE = /^HTTP\/1\.1 101(?: [\t\x20-\x7e\x80-\xff]*)?$/;
const FIELD = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+):[\t ]*([\t\x20-\x7e\x80-\xff]*?)[\t ]*$/;

/**
 * The upstream's answer to the handshake, checked before a byte of it reaches the client: `HTTP/1.1 101`,
 * `Upgrade: websocket`, `Connection` naming `upgrade`, the Sec-WebSocket-Accept the client's key calls
 * for, a sub-protocol only from the client's offer, an extension only if the client offered some.
 * Returns the header list of the 101 Keygate writes to the client (only these fields are relayed), or
 * null for anything else, which the client gets as 502.
 */
export function checkUpgradeAnswer(head: string, request: UpgradeRequest): string[] | null {
  const lines = head.split('\r\n');
  if (!STATUS_LINE.test(lines[0] as string)) return null;
  let upgrade: string | undefined;
  let connection = '';
  let accept: string | undefined;
  let protocol: string | undefined;
  let extensions: string | undefined;
  for (let i = 1; i < lines.length; i++) {
    const m = FIELD.exec(lines[i] as string);
    if (m === null) return null;
    const name = (m[1] as string).toLowerCase();
    const value = m[2] as string;
    if (name === 'upgrade') {
      if (upgrade !== undefined) return null;
      upgrade = value;
    } else if (name === 'connection') connection += `,${value}`;
    else if (name === 'sec-websocket-accept') {
      if (accept !== undefined) return null;
      accept = value;
    } else if (name === 'sec-websocket-protocol') {
      if (protocol !== undefined) return null;
      protocol = value;
    } else if (name === 'sec-websocket-extensions')
      extensions = extensions === undefined ? value : `${extensions}, ${value}`;
  }
  const expected = acceptFor(request.key);
  if (
    upgrade?.toLowerCase() !== 'websocket' ||
    !connection.split(',').some((t) => t.trim().toLowerCase() === 'upgrade') ||
    accept !== expected ||
    (protocol !== undefined && !request.protocols.includes(protocol)) ||
    (extensions !== undefined && (!request.extensions || !EXTENSIONS.test(extensions)))
  )
    return null;
  const out = ['Upgrade', 'websocket', 'Connection', 'Upgrade', 'Sec-WebSocket-Accept', expected];
  if (protocol !== undefined) out.push('Sec-WebSocket-Protocol', protocol);
  if (extensions !== undefined) out.push('Sec-WebSocket-Extensions', extensions);
  return out;
}
