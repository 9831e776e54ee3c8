import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { manualClock } from '../../src/clock.js';
import { createRedisOutageLog } from '../../src/store/redis/connection/redis-outage-log.js';

function setup() {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)) as Record<string, unknown>);
      cb();
    },
  });
  const clock = manualClock(0);
  const log = createRedisOutageLog({ intervalMs: 10_000 }, { logger: pino({ level: 'info' }, sink), clock });
  const seen = () => lines.map((l) => [l.msg, l.conn, l.failures ?? null, l.downForMs ?? null]);
  return { log, clock, seen };
}
const refused = new Error('connect ECONNREFUSED 127.0.0.1:6380');

describe('redis outage log', () => {
  it('down once, still down once per interval with the failures since the last line, reconnected once', () => {
    const { log, clock, seen } = setup();
    log.down('client'); // the close
    for (let t = 500; t <= 25_000; t += 500) {
      clock.set(t);
      log.down('client', refused);
      log.down('client'); // the close after each failed retry
    }
    clock.set(26_000);
    log.up('client');
    log.up('client'); // a second ready without an outage says nothing
    expect(seen()).toEqual([
      ['redis connection down', 'client', null, null],
      ['redis still down', 'client', 20, 10_000],
      ['redis still down', 'client', 20, 20_000],
      ['redis reconnected', 'client', null, 26_000],
    ]);
  });

  it('each connection has its own outage', () => {
    const { log, clock, seen } = setup();
    log.down('client', refused);
    clock.set(1_000);
    log.down('subscriber', refused);
    log.up('client');
    expect(seen()).toEqual([
      ['redis connection down', 'client', null, null],
      ['redis connection down', 'subscriber', null, null],
      ['redis reconnected', 'client', null, 1_000],
    ]);
  });

  it('after stop (Keygate closing its connections) nothing is an outage', () => {
    const { log, seen } = setup();
    log.stop();
    log.down('client');
    log.up('client');
    expect(seen()).toEqual([]);
  });
});
