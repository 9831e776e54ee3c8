import { describe, expect, it } from 'vitest';
import { checkOverride } from '../../src/pipeline/check-override.js';

const NONE = new Set<string>();
const ALL = new Set(['x-http-method-override', 'x-http-method', 'x-method-override', '_method']);
const HEADER_ONLY = new Set(['x-http-method-override']);

describe('checkOverride: method-override headers and _method', () => {
  // [name, method, headers, query, allowed, expected methods or the refusal]
  const cases: Array<
    [string, string, Record<string, string | string[]>, string, ReadonlySet<string>, string[] | 'refused']
  > = [
    ['no override', 'POST', { 'content-type': 'application/json' }, '', NONE, ['POST']],
    ['unrelated query', 'GET', {}, '?page_size=10&q=%20x', NONE, ['GET']],
    ['a parameter merely containing "method"', 'GET', {}, '?payment_method=card&methods=a', NONE, ['GET']],
    ['X-HTTP-Method-Override, not allowed', 'POST', { 'x-http-method-override': 'DELETE' }, '', NONE, 'refused'],
    ['X-HTTP-Method, not allowed', 'POST', { 'x-http-method': 'DELETE' }, '', NONE, 'refused'],
    ['X-Method-Override, not allowed', 'POST', { 'x-method-override': 'DELETE' }, '', NONE, 'refused'],
    ['underscore spelling, not allowed', 'POST', { x_http_method_override: 'DELETE' }, '', NONE, 'refused'],
    ['empty value, not allowed', 'POST', { 'x-http-method-override': '' }, '', NONE, 'refused'],
    ['same method, not allowed', 'POST', { 'x-http-method-override': 'POST' }, '', NONE, 'refused'],
    ['_method, not allowed', 'POST', {}, '?_method=DELETE', NONE, 'refused'],
    ['_method without a value', 'POST', {}, '?a=1&_method', NONE, 'refused'],
    ['_method after ";"', 'POST', {}, '?a=1;_method=DELETE', NONE, 'refused'],
    ['%5Fmethod (decoded by query parsers)', 'POST', {}, '?%5Fmethod=DELETE', NONE, 'refused'],
    ['_%6Dethod', 'POST', {}, '?_%6Dethod=DELETE', NONE, 'refused'],
    ['_METHOD', 'POST', {}, '?_METHOD=DELETE', NONE, 'refused'],
    ['_method[] (array form)', 'POST', {}, '?_method[]=DELETE', ALL, 'refused'],
    ['_method.x (dot form)', 'POST', {}, '?_method.x=DELETE', ALL, 'refused'],
    [
      'header allowed: both methods',
      'POST',
      { 'x-http-method-override': 'DELETE' },
      '',
      HEADER_ONLY,
      ['POST', 'DELETE'],
    ],
    [
      'header allowed, lower-case value',
      'POST',
      { 'x-http-method-override': ' delete ' },
      '',
      HEADER_ONLY,
      ['POST', 'DELETE'],
    ],
    ['header allowed, same method', 'POST', { 'x-http-method-override': 'POST' }, '', HEADER_ONLY, ['POST']],
    ['header allowed, the other header is not', 'POST', { 'x-http-method': 'DELETE' }, '', HEADER_ONLY, 'refused'],
    ['header allowed, _method is not', 'POST', {}, '?_method=DELETE', HEADER_ONLY, 'refused'],
    ['allowed, not a method', 'POST', { 'x-http-method-override': 'DELETE ME' }, '', ALL, 'refused'],
    ['allowed, empty', 'POST', { 'x-http-method-override': '' }, '', ALL, 'refused'],
    ['allowed, sent twice', 'POST', { 'x-http-method-override': ['DELETE', 'PUT'] }, '', ALL, 'refused'],
    [
      'allowed, header and _method disagree',
      'POST',
      { 'x-http-method-override': 'DELETE' },
      '?_method=PUT',
      ALL,
      'refused',
    ],
    [
      'allowed, header and _method agree',
      'POST',
      { 'x-http-method-override': 'DELETE' },
      '?_method=delete',
      ALL,
      ['POST', 'DELETE'],
    ],
    ['allowed, _method twice, disagreeing', 'POST', {}, '?_method=PUT&_method=DELETE', ALL, 'refused'],
    ['allowed, encoded _method value', 'POST', {}, '?_method=%44ELETE', ALL, ['POST', 'DELETE']],
  ];
  it.each(cases)('%s', (_name, method, headers, query, allowed, expected) => {
    const r = checkOverride(method, headers, query, allowed);
    if (expected === 'refused') expect(r).toEqual({ ok: false, code: 40000, reason: 'method_override' });
    else expect(r).toEqual({ ok: true, methods: expected });
  });
});
