import { describe, expect, it } from 'vitest';
import { checkHeaders } from '../../src/pipeline/check-headers.js';

const fields = (n: number) => Array.from({ length: n }, (_x, i) => [`X-F${i}`, 'v']).flat();

describe('checkHeaders: the header list as a whole', () => {
  it.each([
    { name: 'one Host', raw: ['Host', 'h'], reason: undefined },
    { name: 'no Host (HTTP/1.0)', raw: [], reason: undefined },
    { name: 'Host twice, same value', raw: ['Host', 'h', 'Host', 'h'], reason: 'ambiguous_header' },
    { name: 'Host twice, any case', raw: ['Host', 'a.test', 'hOST', 'b.test'], reason: 'ambiguous_header' },
    { name: 'Host twice, apart', raw: ['Host', 'a', ...fields(5), 'host', 'b'], reason: 'ambiguous_header' },
    {
      name: 'X-Forwarded-Host beside Host is not a second Host',
      raw: ['Host', 'a', 'X-Forwarded-Host', 'b'],
      reason: undefined,
    },
    { name: 'at the field limit', raw: ['Host', 'h', ...fields(9)], reason: undefined },
    { name: 'past the field limit', raw: ['Host', 'h', ...fields(10)], reason: 'too_many_headers' },
    {
      name: 'past the limit and Host twice: the count first',
      raw: ['Host', 'a', 'Host', 'b', ...fields(9)],
      reason: 'too_many_headers',
    },
  ])('$name', ({ raw, reason }) => {
    const v = checkHeaders(raw, 10);
    if (reason === undefined) expect(v.ok).toBe(true);
    else expect(v).toMatchObject({ ok: false, reason });
  });
});
