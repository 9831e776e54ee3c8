import { describe, expect, it } from 'vitest';
import {
  feedTransition,
  isSubscribed,
  type FeedEffect,
  type FeedEvent,
  type FeedState,
} from '../../src/store/redis/change-feed-states.js';
import { readDoc, section, tableRows } from '../helpers/markdown.js';

const STATES: FeedState[] = ['unsubscribed', 'confirming', 'subscribed', 'reconfirming', 'lost'];

/** The letters of the table in change-feed-states.ts and docs/redis.md. */
const EFFECT: Record<string, FeedEffect> = {
  S: 'subscribe',
  R: 'rebuild-filter',
  U: 'report-up',
  F: 'forget-filter',
  D: 'report-down',
  L: 'flush-caches',
  M: 'move-subscriber',
  W: 'warn-and-retry',
};

/**
 * Every event in every state, with the subscriber connection ready or not: the next state (· = unchanged) and
 * what is done, in order. The same table as docs/redis.md "The change feed" (checked below); written here by hand
 * from what the Redis store's handlers did before the feed had named states.
 */
type Guard = 'any' | 'ready' | 'not ready';
const TABLE: ReadonlyArray<[FeedEvent, Guard, Record<FeedState, string>]> = [
  [
    'ready',
    'any',
    {
      unsubscribed: 'confirming S',
      confirming: '·',
      subscribed: 'reconfirming S',
      reconfirming: '·',
      lost: 'confirming S',
    },
  ],
  [
    'confirmed',
    'ready',
    {
      unsubscribed: 'subscribed RUL',
      confirming: 'subscribed RUL',
      subscribed: 'subscribed RUL',
      reconfirming: 'subscribed RUL',
      lost: 'subscribed RUL',
    },
  ],
  [
    'confirmed',
    'not ready',
    { unsubscribed: '·', confirming: 'unsubscribed', subscribed: '·', reconfirming: 'subscribed', lost: '·' },
  ],
  [
    'failed',
    'any',
    { unsubscribed: '· W', confirming: 'unsubscribed W', subscribed: '· W', reconfirming: 'subscribed W', lost: '· W' },
  ],
  [
    'close',
    'any',
    {
      unsubscribed: '· FD',
      confirming: '· FD',
      subscribed: 'unsubscribed FD',
      reconfirming: 'confirming FD',
      lost: '· FD',
    },
  ],
  [
    'heartbeat-lost',
    'any',
    {
      unsubscribed: 'lost FLM',
      confirming: 'lost FLM',
      subscribed: 'lost FDLM',
      reconfirming: 'lost FDLM',
      lost: 'lost FLM',
    },
  ],
  [
    'heartbeat-heard',
    'ready',
    {
      unsubscribed: 'subscribed RUL',
      confirming: 'reconfirming RUL',
      subscribed: '·',
      reconfirming: '·',
      lost: 'subscribed RUL',
    },
  ],
  [
    'heartbeat-heard',
    'not ready',
    { unsubscribed: '·', confirming: '·', subscribed: '·', reconfirming: '·', lost: '·' },
  ],
];
const readiness = (guard: Guard) => (guard === 'any' ? [true, false] : [guard === 'ready']);
const rowName = (event: FeedEvent, guard: Guard) => (guard === 'any' ? event : `${event} (${guard})`);

const parse = (state: FeedState, cell: string) => {
  const [next, letters = ''] = cell.split(' ');
  return {
    next: next === '·' ? state : (next as FeedState),
    effects: [...letters].map((l) => EFFECT[l]!),
  };
};

describe('the change feed: each event in each state → the next state and what happens to the cache', () => {
  it.each(
    TABLE.flatMap(([event, guard, row]) =>
      readiness(guard).flatMap((ready) => STATES.map((state) => [event, ready, state, row[state]] as const)),
    ),
  )('%s (subscriber ready: %s) in %s → %s', (event, ready, state, cell) => {
    expect(feedTransition(state, event, ready)).toEqual(parse(state, cell));
  });

  it('a cached key outlives the short TTL only in the states where change messages are trusted', () => {
    expect(STATES.filter(isSubscribed)).toEqual(['subscribed', 'reconfirming']);
  });

  it('no transition trusts change messages without a proof: a confirmed SUBSCRIBE or a heard heartbeat', () => {
    for (const [event, guard] of TABLE)
      for (const ready of readiness(guard))
        for (const state of STATES) {
          const { next } = feedTransition(state, event, ready);
          if (isSubscribed(next) && !isSubscribed(state)) expect(['confirmed', 'heartbeat-heard']).toContain(event);
        }
  });

  it('every state gives up its trust on a close or a lost heartbeat, and flushes the caches when it regains it', () => {
    for (const state of STATES) {
      for (const ready of [true, false]) {
        expect(isSubscribed(feedTransition(state, 'heartbeat-lost', ready).next)).toBe(false);
        const regained = feedTransition(state, 'confirmed', true);
        expect(regained.effects).toContain('flush-caches');
      }
      expect(feedTransition(state, 'close', false).effects).toContain('forget-filter');
    }
  });
});

describe('docs/redis.md "The change feed" has the same table', () => {
  const rows = tableRows(section(readDoc('docs/redis.md'), 'The change feed'));
  const header = rows.find((cells) => cells[0]?.startsWith('event'));
  it('has one column per state, in order', () => {
    expect(header?.slice(1).map((c) => c.replaceAll('`', ''))).toEqual(STATES);
  });
  it.each(TABLE.map(([event, guard, row]) => [rowName(event, guard), row] as const))('row "%s"', (name, row) => {
    const line = rows.find((cells) => cells[0]!.replaceAll('`', '') === name);
    expect(line?.slice(1)).toEqual(STATES.map((s) => row[s]));
  });
});
