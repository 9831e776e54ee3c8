import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createBlockedRequestLog } from '../../src/gateway/blocked-request-log.js';

function capture() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      cb();
    },
  });
  return { lines, logger: pino({ level: 'info' }, sink) };
}
const settle = () => new Promise((r) => setImmediate(r));
const refused = (lines: Record<string, unknown>[], ip: string) =>
  lines.filter((l) => l.clientIp === ip).reduce((n, l) => n + Number(l.refused), 0);

describe('createBlockedRequestLog', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('the first refusal of a run is logged in full, the rest summed up once per interval per IP', async () => {
    const { lines, logger } = capture();
    const log = createBlockedRequestLog({ intervalMs: 1_000 }, { logger });
    expect(log.note('192.0.2.1')).toBe(true);
    for (let i = 0; i < 9; i++) expect(log.note('192.0.2.1')).toBe(false);
    expect(log.note('2001:db8:1:2::/64')).toBe(true); // another IP: a run of its own
    expect(log.note('2001:db8:1:2::/64')).toBe(false);
    await settle();
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(1_000);
    await settle();
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      msg: 'blocked requests',
      clientIp: '192.0.2.1',
      code: 10429,
      reason: 'ip_blocked',
      status: 429,
      refused: 9,
      intervalMs: 1_000,
    });
    expect(lines[1]).toMatchObject({ clientIp: '2001:db8:1:2::/64', refused: 1 });
    // The run goes on: no full line, counted for the next summary.
    for (let i = 0; i < 5; i++) expect(log.note('192.0.2.1')).toBe(false);
    vi.advanceTimersByTime(1_000);
    await settle();
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({ clientIp: '192.0.2.1', refused: 5 });
  });

  it('an interval with no refusal ends the run: the next refusal is logged in full again', async () => {
    const { lines, logger } = capture();
    const log = createBlockedRequestLog({ intervalMs: 1_000 }, { logger });
    expect(log.note('192.0.2.1')).toBe(true);
    vi.advanceTimersByTime(1_000); // nothing to sum up: no line
    vi.advanceTimersByTime(1_000);
    await settle();
    expect(lines).toEqual([]);
    expect(log.note('192.0.2.1')).toBe(true);
  });

  it('flush writes what has not been written, so every refusal is accounted for', async () => {
    const { lines, logger } = capture();
    const log = createBlockedRequestLog({ intervalMs: 1_000 }, { logger });
    let full = 0;
    for (let i = 0; i < 250; i++) if (log.note(i % 5 === 0 ? '192.0.2.9' : '192.0.2.1')) full++;
    vi.advanceTimersByTime(1_000);
    for (let i = 0; i < 40; i++) if (log.note('192.0.2.1')) full++;
    log.flush();
    await settle();
    expect(full).toBe(2);
    expect(refused(lines, '192.0.2.1') + refused(lines, '192.0.2.9') + full).toBe(290);
    // Flushed: nothing is left to write, and a new refusal starts a new run.
    vi.advanceTimersByTime(5_000);
    await settle();
    const written = lines.length;
    expect(log.note('192.0.2.1')).toBe(true);
    expect(lines).toHaveLength(written);
  });

  it('past maxIps a new IP is not summed up: each of its refusals gets its own line (never uncounted)', () => {
    const { logger } = capture();
    const log = createBlockedRequestLog({ intervalMs: 1_000, maxIps: 2 }, { logger });
    expect(log.note('192.0.2.1')).toBe(true);
    expect(log.note('192.0.2.2')).toBe(true);
    expect(log.note('192.0.2.3')).toBe(true);
    expect(log.note('192.0.2.3')).toBe(true);
    expect(log.note('192.0.2.1')).toBe(false);
  });
});
