import { describe, expect, it } from 'vitest';
import { readCredentials } from '../../src/pipeline/read-credentials.js';

describe('readCredentials: the Authorization header rules', () => {
  const cases: Array<[string, string[], object]> = [
    ['no header', ['Host', 'x'], { ok: false, code: 40004, reason: 'missing_header' }],
    ['empty header', ['Authorization', ''], { ok: false, code: 40004, reason: 'missing_header' }],
    ['exact Bearer', ['Authorization', 'Bearer a.b.c'], { ok: true, token: 'a.b.c' }],
    ['name in any case', ['aUtHoRiZaTiOn', 'Bearer a.b.c'], { ok: true, token: 'a.b.c' }],
    ['lower-case bearer', ['Authorization', 'bearer a.b.c'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['upper-case BEARER', ['Authorization', 'BEARER a.b.c'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['two spaces', ['Authorization', 'Bearer  a.b.c'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['tab', ['Authorization', 'Bearer\ta.b.c'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['extra part', ['Authorization', 'Bearer a.b.c extra'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['Bearer alone', ['Authorization', 'Bearer'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['Basic scheme', ['Authorization', 'Basic dXNlcjpwYXNz'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    ['token only', ['Authorization', 'a.b.c'], { ok: false, code: 40107, reason: 'bad_header_format' }],
    [
      'duplicate headers',
      ['Authorization', 'Bearer a.b.c', 'authorization', 'Bearer d.e.f'],
      { ok: false, code: 40107, reason: 'duplicate_header' },
    ],
    [
      'duplicate, one empty',
      ['Authorization', '', 'Authorization', 'Bearer a.b.c'],
      { ok: false, code: 40107, reason: 'duplicate_header' },
    ],
  ];
  it.each(cases)('%s', (_name, raw, expected) => {
    expect(readCredentials(raw)).toEqual(expected);
  });
});
