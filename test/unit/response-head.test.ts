import { describe, expect, it } from 'vitest';
import { responseHead } from '../../src/gateway/response-head.js';

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
});
