import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { guard } from '../helpers/slowdown.js';

const run = promisify(execFile);

/**
 * The benchmark harness in its short mode. No throughput thresholds here
 * (benchmarks are not timed tests); this checks the harness runs end to end
 * and that what it measured is what it claims: every forwarded request got a
 * 2xx, the mixed load was refused in the expected share, rejections were all refused.
 */
describe('benchmark harness (short mode)', () => {
  it('measures every target side by side and writes a result file', { timeout: guard(180_000) }, async () => {
    const out = join(mkdtempSync(join(tmpdir(), 'keygate-bench-test-')), 'result.json');
    await run('node', ['scripts/bench.mjs', '--short', '--duration', '1', '--connections', '20', '--out', out], {
      timeout: guard(170_000),
      maxBuffer: 10_000_000,
    });
    const r = JSON.parse(readFileSync(out, 'utf8'));
    for (const name of ['upstream-direct', 'bare-http-proxy', 'keygate-redis', 'keygate-embedded']) {
      expect(r.forward[name].rps, name).toBeGreaterThan(0);
      expect(r.forward[name].non2xx, name).toBe(0);
      expect(r.forward[name].errors, name).toBe(0);
      expect(r.forward[name].peakRssMb, name).toBeGreaterThan(0);
    }
    expect(r.ratios['keygate-redis'].throughputVsBare).toBeGreaterThan(0);
    for (const name of ['keygate-redis', 'keygate-embedded']) {
      // 10% replays + 10% bad signatures: about 20% refused (the token file's spread is deterministic).
      expect(r.mixed10pctReplay10pctBad[name].non2xxShare).toBeGreaterThan(0.15);
      expect(r.mixed10pctReplay10pctBad[name].non2xxShare).toBeLessThan(0.25);
      expect(r.pureRejection[name].non2xxShare).toBe(1);
    }
    // A difference of Redis's used_memory before and after the run: it is measured, but Redis frees and
    // defragments on its own schedule, so on a busy machine it can come out negative. Reported, not bounded.
    expect(Number.isFinite(r.redisNonceBytesPerRequest), 'redisNonceBytesPerRequest is a number').toBe(true);
  });

  it(
    'A/B: builds the baseline revision in a worktree and measures both builds side by side',
    { timeout: guard(180_000) },
    async () => {
      const out = join(mkdtempSync(join(tmpdir(), 'keygate-bench-ab-test-')), 'ab.json');
      await run(
        'node',
        [
          'scripts/bench-ab.mjs',
          '--baseline',
          'HEAD',
          '--rate',
          '300',
          '--duration',
          '1',
          '--rounds',
          '1',
          '--stores',
          'embedded',
          '--public',
          '--out',
          out,
        ],
        {
          timeout: guard(170_000),
          maxBuffer: 10_000_000,
        },
      );
      const r = JSON.parse(readFileSync(out, 'utf8'));
      expect(r.builds.baseline).toMatch(/^HEAD \([0-9a-f]{7,}\)$/);
      for (const name of ['bare-http-proxy', 'current:embedded', 'baseline:embedded', 'current:public'])
        expect(r.targets[name].cpuUsPerRequest, name).toBeGreaterThan(0);
      expect(r.comparison.embedded.cpuCurrentVsBaseline).toBeGreaterThan(0);
      // Its worktree is removed afterwards (other checkouts of this repository may have their own).
      const { stdout } = await run('git', ['worktree', 'list', '--porcelain']);
      expect(r.baselineWorktree).toContain('keygate-bench-ab-');
      expect(stdout).not.toContain(r.baselineWorktree);
    },
  );
});
