import { describe, expect, it } from 'vitest';
import { responseHead } from '../../src/gateway/upstream/response-head.js';

const raw = (...pairs: string[]) => pairs.map((p) => Buffer.from(p, 'latin1'));

describe('responseHead: the upstream’s end-to-end headers only', () => {
  it('drops Connection and what it names, keeps the rest in order', () => {
    expect(
      responseHead(
        raw('Connection', 'keep-alive, X-Hop', 'X-Hop', '1', 'Content-Type', 'text/plain', 'Keep-Alive', 'timeout=5'),
        'r-1',
      ),
    ).toEqual(['Content-Type', 'text/plain', 'x-request-id', 'r-1']);
  });

  it('the usual Connection values (keep-alive, close, in any case and spacing) leave every other header', () => {
    for (const value of ['keep-alive', 'close', 'Keep-Alive', ' close , keep-alive ', 'keep-alive,,close'])
      expect(responseHead(raw('Connection', value, 'Content-Length', '2', 'X-Request-Id', 'up'), 'r-2'), value).toEqual(
        ['Content-Length', '2', 'X-Request-Id', 'up'],
      );
  });

  it('a token that only starts like a hop-by-hop name is still a header name to drop', () => {
    expect(responseHead(raw('Connection', 'keep-aliveclose', 'keep-aliveclose', 'x', 'X-A', 'a'), 'r-3')).toEqual([
      'X-A',
      'a',
      'x-request-id',
      'r-3',
    ]);
    expect(
      responseHead(raw('Connection', 'close x-b', 'close x-b', 'y', 'Connection', 'X-C', 'X-C', 'z'), 'r-4'),
    ).toEqual(['x-request-id', 'r-4']);
  });

  it('hands back every name and value exactly as its bytes read, however often equal or near-equal bytes repeat', () => {
    // Near-equal values (same length, one byte apart, latin1 high bytes, empty, longer than the table
    // keeps) interleaved many times: a string is reused only for bytes equal to its own.
    const values = [
      'application/json',
      'application/jsoN',
      'application/jso\xe9',
      '',
      '2',
      '3',
      'x'.repeat(64),
      'x'.repeat(65),
    ];
    for (let i = 0; i < 2_000; i++)
      values.push(`v-${i % 300}`, `Mon, 01 Jan 2024 00:00:${String(i % 60).padStart(2, '0')} GMT`);
    for (let round = 0; round < 3; round++)
      for (let i = 0; i < values.length; i++) {
        const value = values[(i * 7 + round) % values.length]!;
        const name = i % 2 ? 'X-Value' : 'x-valuE';
        expect(responseHead(raw(name, value), 'r')).toEqual([name, value, 'x-request-id', 'r']);
      }
  });
});
