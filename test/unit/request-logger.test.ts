import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { boundedDestination, createLogger } from '../../src/observe/logger.js';
import { createRequestLogger, REQUEST_LINE_FIELDS } from '../../src/observe/request-logger.js';

function capture(level = 'info') {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: createLogger({ level }, sink), lines };
}

const withoutTime = (line: string) => {
  const { time, ...rest } = JSON.parse(line) as Record<string, unknown>;
  expect(typeof time).toBe('number');
  return rest;
};

/** The request line's fixed serializer writes what pino itself would, field for field. */
describe('createRequestLogger', () => {
  const cases: Array<[string, Record<string, unknown>, boolean]> = [
    [
      'forwarded',
      {
        requestId: 'r-1',
        method: 'GET',
        route: '/api/v3/viewer/accounts',
        clientIp: '127.0.0.1',
        keyId: 'key_1',
        code: 'ok',
        status: 200,
        authMs: 0.052,
        upstreamMs: 0.4,
        durationMs: 0.61,
      },
      false,
    ],
    [
      'refused',
      {
        requestId: 'r-2',
        method: 'POST',
        route: undefined,
        clientIp: '::1',
        code: 40106,
        reason: 'replay',
        status: 401,
        authMs: 0.1,
        durationMs: 0.2,
      },
      false,
    ],
    [
      'upstream failure at warn',
      {
        requestId: 'r-3',
        method: 'GET',
        clientIp: '10.0.0.1',
        code: 50200,
        reason: 'upstream_bad_response',
        status: 502,
        aborted: true,
      },
      true,
    ],
    [
      'quotes, backslashes, control and non-ASCII characters stay inside their field',
      { requestId: 'r"4\\', method: 'GET', route: '/api/v3/x\n"y":1', clientIp: '\u0000é' },
      false,
    ],
    [
      'printable ASCII at the edges of the unescaped range, and DEL, which JSON leaves as is too',
      { requestId: ' !#[]~', method: 'GET', route: '/a\u007fb', clientIp: '' },
      false,
    ],
  ];
  it.each(cases)('%s: same object as pino writes', (_name, line, warn) => {
    const fast = capture();
    const slow = capture();
    createRequestLogger(fast.logger)(line, warn);
    if (warn) slow.logger.warn(line, 'request');
    else slow.logger.info(line, 'request');
    expect(fast.lines).toHaveLength(1);
    expect(fast.lines[0]!.endsWith('}\n')).toBe(true);
    expect(withoutTime(fast.lines[0]!)).toEqual(withoutTime(slow.lines[0]!));
  });

  it('leaves out any field not on the allow-list (a token or a secret can never be written)', () => {
    const fast = capture();
    createRequestLogger(fast.logger)(
      { requestId: 'r', token: 'eyJ.secret.sig', apiSecret: 's3cret', authorization: 'Bearer x', headers: { a: 1 } },
      false,
    );
    const parsed = JSON.parse(fast.lines[0]!) as Record<string, unknown>;
    expect(Object.keys(parsed).filter((k) => !['level', 'time', 'pid', 'name', 'msg'].includes(k))).toEqual([
      'requestId',
    ]);
    expect(REQUEST_LINE_FIELDS).not.toContain('token');
  });

  it('respects the logger level', () => {
    const quiet = capture('warn');
    const log = createRequestLogger(quiet.logger);
    log({ requestId: 'r' }, false);
    expect(quiet.lines).toHaveLength(0);
    log({ requestId: 'r' }, true);
    expect(JSON.parse(quiet.lines[0]!)).toMatchObject({ level: 40, requestId: 'r', msg: 'request' });
  });
});

describe('createRequestLogger on Keygate’s own destination (lines handed over in batches)', () => {
  it('writes every allow-listed field it is given', () => {
    const fast = capture();
    const line = Object.fromEntries(REQUEST_LINE_FIELDS.map((name) => [name, `v-${name}`]));
    createRequestLogger(fast.logger)(line, false);
    expect(JSON.parse(fast.lines[0]!)).toMatchObject(line);
  });

  it('loses no line and keeps the order they were written in, beside other logger lines too: flush() and flushSync() first take the lines still batched', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'request-logger-'));
    try {
      const file = join(dir, 'out.log');
      const destination = boundedDestination({ fd: openSync(file, 'w') });
      const logger = createLogger({ level: 'info' }, destination);
      const log = createRequestLogger(logger);
      for (let i = 0; i < 5; i++) log({ requestId: `r-${i}` }, false);
      logger.info('between');
      log({ requestId: 'r-5' }, true);
      (destination as unknown as { flushSync(): void }).flushSync();
      const lines = readFileSync(file, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const ids = lines.filter((l) => l.msg === 'request').map((l) => l.requestId);
      expect(ids).toEqual(['r-0', 'r-1', 'r-2', 'r-3', 'r-4', 'r-5']);
      // Another logger line written between request lines lands between them in the output too.
      expect(lines.map((l) => (l.msg === 'request' ? l.requestId : l.msg))).toEqual([
        'r-0',
        'r-1',
        'r-2',
        'r-3',
        'r-4',
        'between',
        'r-5',
      ]);
      // Two request loggers on one logger (the request path's and the upgrade path's): one order between them too.
      const other = createRequestLogger(logger);
      log({ requestId: 'x-0' }, false);
      other({ requestId: 'x-1' }, false);
      log({ requestId: 'x-2' }, false);
      (destination as unknown as { flushSync(): void }).flushSync();
      const both = readFileSync(file, 'utf8').trim().split('\n').slice(-3);
      expect(both.map((l) => (JSON.parse(l) as { requestId: string }).requestId)).toEqual(['x-0', 'x-1', 'x-2']);
      // Past the batch size the lines go out without a flush.
      const many = Array.from({ length: 400 }, (_, i) => `m-${i}`);
      for (const id of many) log({ requestId: id, route: '/api/v3/viewer/accounts', clientIp: '127.0.0.1' }, false);
      await new Promise<void>((resolve) => logger.flush(() => resolve()));
      const after = readFileSync(file, 'utf8').trim().split('\n');
      expect(after.slice(-400).map((l) => (JSON.parse(l) as { requestId: string }).requestId)).toEqual(many);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes what pino writes, whichever path a line takes (written into the batch, or built as a string)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'request-logger-'));
    try {
      const file = join(dir, 'out.log');
      const destination = boundedDestination({ fd: openSync(file, 'w') });
      const log = createRequestLogger(createLogger({ level: 'info' }, destination));
      const pinoSide = capture();
      const lines: Array<Record<string, unknown>> = [
        { requestId: 'r-1', method: 'GET', code: 'ok', status: 200, authMs: 0.052, upstreamMs: 12.5, durationMs: 0 },
        { requestId: 'r-2', code: 40106, status: -1, authMs: 1e21, upstreamMs: Number.NaN, durationMs: Infinity },
        { requestId: 'r-3', aborted: true, parserError: 'HPE_INVALID_METHOD', status: 9_007_199_254_740_991 },
        { requestId: 'r-4', route: '/api/v3/x\n"y"', clientIp: 'é', keyId: 'key_\u2028' },
        { requestId: 'r-5', route: `/api/v3/${'a'.repeat(20_000)}`, authMs: -0 },
        { requestId: 'r-6', method: 'DEL\u007f', aborted: false, code: 50000 },
      ];
      // Enough plain lines between them that batches fill and are handed over mid-way.
      for (let round = 0; round < 60; round++)
        for (const line of lines) {
          const numbered = { ...line, requestId: `${line.requestId as string}-${round}` };
          log(numbered, false);
          pinoSide.logger.info(numbered, 'request');
        }
      // flush, not flushSync: flushSync writes what is pending while a write already under way (a batch handed
      // over mid-way) may not have reached the file yet on a busy machine; flush calls back once all of it has.
      // Both take the request lines waiting in the batch first.
      await new Promise<void>((resolve, reject) =>
        (destination as unknown as { flush(cb: (err?: Error) => void): void }).flush((err) =>
          err ? reject(err) : resolve(),
        ),
      );
      const written = readFileSync(file, 'utf8').split('\n');
      expect(written.pop()).toBe('');
      expect(written).toHaveLength(pinoSide.lines.length);
      written.forEach((line, i) => expect(withoutTime(line)).toEqual(withoutTime(pinoSide.lines[i]!)));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
