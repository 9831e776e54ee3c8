import { describe, expect, it } from 'vitest';
import { runKeygate, serveKeygate } from '../helpers/spawn-keygate.js';

/** Issue 35 item 3: a misspelt KEYGATE_* variable used to leave its default in force without a word. */
const MISSPELT = { KEYGATE_REDIS_ULR: 'redis://127.0.0.1:1', KEYGATE_UPSTRAEM: 'http://127.0.0.1:9' };
const WARNINGS = [
  'KEYGATE_REDIS_ULR: not a Keygate setting, ignored (did you mean KEYGATE_REDIS_URL?)',
  'KEYGATE_UPSTRAEM: not a Keygate setting, ignored (did you mean KEYGATE_UPSTREAM?)',
];

describe('misspelt KEYGATE_* variables (real CLI process)', () => {
  it('check-config: an error naming the nearest setting, exit 1', async () => {
    const failed = await runKeygate(['check-config'], {
      ...MISSPELT,
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: undefined,
    }).then(
      () => undefined,
      (err: { code: number; stdout: string; stderr: string }) => err,
    );
    expect(failed?.code).toBe(1);
    expect(failed?.stdout).not.toContain('configuration is valid');
    for (const w of WARNINGS) expect(failed?.stderr).toContain(w);
  });

  it("check-config: the suite's own variables are not reported", async () => {
    const { stdout } = await runKeygate(['check-config'], {
      KEYGATE_UPSTREAM: 'http://127.0.0.1:9',
      KEYGATE_REDIS_URL: undefined,
      KEYGATE_TEST_REDIS_URL: 'redis://127.0.0.1:1',
      KEYGATE_PROPERTY_RUNS: '5',
      KEYGATE_SOAK_SECONDS: '1',
    });
    expect(stdout).toContain('configuration is valid');
  });

  it('serve: starts, one warning per name, in the log', async () => {
    const s = await serveKeygate({ ...MISSPELT, KEYGATE_UPSTREAM: 'http://127.0.0.1:9' });
    try {
      await s.line('keygate started');
      const warned = s
        .lines()
        .filter((l) => l.level === 40 && String(l.msg).includes('not a Keygate setting'))
        .map((l) => l.msg);
      expect(warned).toEqual(WARNINGS);
    } finally {
      await s.stop();
    }
  });
});
