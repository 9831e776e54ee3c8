import { describe, expect, it } from 'vitest';
import { checkTarget } from '../../src/pipeline/check-target.js';
import { BAD_TARGETS } from '../helpers/cases/request-targets.js';

describe('checkTarget: only plain origin-form targets pass', () => {
  const accepted: Array<[string, string, string, string]> = [
    ['GET', '/api/v3/viewer/accounts', '/api/v3/viewer/accounts', ''],
    ['GET', '/api/v3/viewer/accounts?limit=10&x=%20y', '/api/v3/viewer/accounts', '?limit=10&x=%20y'],
    ['POST', '/api/v3/items/abc-123_x.y~z', '/api/v3/items/abc-123_x.y~z', ''],
    ['GET', '/api/v3/a%20b', '/api/v3/a%20b', ''],
    ['GET', '/healthz', '/healthz', ''],
    ['GET', '/', '/', ''],
    ['GET', '/api/v3/x?a=b?c', '/api/v3/x', '?a=b?c'],
    ['GET', `/${'a'.repeat(4095)}`, `/${'a'.repeat(4095)}`, ''],
    ['GET', `${'/a'.repeat(64)}?${'x'.repeat(3000)}`, '/a'.repeat(64), `?${'x'.repeat(3000)}`],
  ];
  it.each(accepted)('%s %s passes', (method, url, path, query) => {
    expect(checkTarget(method, url)).toEqual({ ok: true, path, query });
  });

  // Targets only a direct call can express: other methods, none at all, bytes Node's parser refuses first.
  const refused: Array<[string, string | undefined, string]> = [
    ['CONNECT', 'example.com:443', 'CONNECT'],
    ['CONNECT', '/api/v3/viewer/accounts', 'CONNECT with a path'],
    ['TRACE', '/api/v3/viewer/accounts', 'TRACE'],
    ['get', '/api/v3/viewer/accounts', 'lower-case method'],
    ['GET', undefined, 'no target'],
    ['GET', '', 'empty target'],
    ['GET', '/api/v3/viewer/accounts\u0000', 'raw NUL'],
    ['GET', '/api/v3/vïewer/accounts', 'non-ASCII'],
    ['GET', '/api/v3/viewer accounts', 'space'],
  ];
  it.each(refused)('%s %s is refused (%s)', (method, url) => {
    expect(checkTarget(method, url)).toEqual({ ok: false, code: 40000, reason: 'bad_target' });
  });
  // The targets the over-the-wire table sends too (test/helpers/cases/request-targets.ts).
  it.each(BAD_TARGETS)('GET %s is refused (shared table)', (_name, url) => {
    expect(checkTarget('GET', url)).toEqual({ ok: false, code: 40000, reason: 'bad_target' });
  });

  // Bounds checked before any route is matched (MAX_PATH_BYTES, MAX_PATH_SEGMENTS).
  const bounded: Array<[string, string, string]> = [
    ['4,097-byte path', `/${'a'.repeat(4096)}`, 'path_too_long'],
    ['65 segments', '/a'.repeat(65), 'too_many_segments'],
    ['65 segments, the last empty', `${'/a'.repeat(64)}/`, 'too_many_segments'],
    ["the issue's 8 KB target of 4,000 segments", `/api/v3/${'x/'.repeat(4000)}`, 'path_too_long'],
    ['2,000 one-letter segments (4,000 bytes)', '/x'.repeat(2000), 'too_many_segments'],
  ];
  it.each(bounded)('%s: 400 40000 %s', (_name, url, reason) => {
    expect(checkTarget('GET', url)).toEqual({ ok: false, code: 40000, reason });
  });
});
