/**
 * The follow-graph walk (nostr.trust) against a pure reference BFS over generated graphs:
 * the set is exactly the pubkeys within `hops` of the seeds through each author's latest
 * follow list (the first maxFollowsPerList distinct p-tags), whatever the source answers
 * besides (older versions, strangers' lists, junk, any order, any batch size); with
 * maxPubkeys below that, a subset of that size. And the packed set answers as a Set would.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { Event } from 'nostr-tools/pure';
import { followsOf, walkFollowGraph } from '../../../src/trust/follow-graph.js';
import { PubkeySet } from '../../../src/trust/pubkey-set.js';
import { propertyParams } from '../../helpers/property-params.js';

const keyOf = (i: number) => createHash('sha256').update(`pk${i}`).digest('hex');

interface Version {
  author: number;
  createdAt: number;
  idNonce: number;
  follows: number[];
  /** Whether p-tags are written in upper case (the walk lowers them). */
  upper: boolean;
}

/** The event of a version; `index` makes ids distinct (an id is its content's hash). */
function eventOf(v: Version, index: number): Event {
  const tags = v.follows.map((f) => ['p', v.upper ? keyOf(f).toUpperCase() : keyOf(f)]);
  // Tags that are not follows are passed by.
  tags.push(['e', keyOf(999)], ['p', 'not-a-key'], ['t', 'x']);
  return {
    kind: 3,
    pubkey: keyOf(v.author),
    created_at: v.createdAt,
    id: createHash('sha256').update(`id${v.idNonce}:${index}`).digest('hex'),
    sig: '00',
    tags,
    content: '',
  };
}

/** The reference: latest list per author by sorting, then a level-by-level BFS. */
function referenceSet(
  versions: Version[],
  seeds: number[],
  hops: number,
  maxFollows: number,
): Set<string> {
  const latest = new Map<string, Event>();
  const events = versions.map(eventOf);
  events.sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (const e of events) if (!latest.has(e.pubkey)) latest.set(e.pubkey, e);
  const reached = new Set(seeds.map(keyOf));
  let level = [...reached];
  for (let h = 0; h < hops; h++) {
    const next: string[] = [];
    for (const author of level) {
      const list = latest.get(author);
      if (!list) continue;
      const follows: string[] = [];
      for (const t of list.tags) {
        const hex = String(t[1]).toLowerCase();
        if (t[0] === 'p' && /^[0-9a-f]{64}$/.test(hex) && !follows.includes(hex)) follows.push(hex);
      }
      for (const f of follows.slice(0, maxFollows)) {
        if (!reached.has(f)) {
          reached.add(f);
          next.push(f);
        }
      }
    }
    level = next;
  }
  return reached;
}

const N = 24;
const graphArb = fc.record({
  versions: fc.array(
    fc.record({
      author: fc.integer({ min: 0, max: N - 1 }),
      createdAt: fc.integer({ min: 1, max: 6 }), // few values: ties happen
      idNonce: fc.integer({ min: 0, max: 1_000_000 }),
      follows: fc.array(fc.integer({ min: 0, max: N - 1 }), { maxLength: 8 }),
      upper: fc.boolean(),
    }),
    { maxLength: 60 },
  ),
  seeds: fc.array(fc.integer({ min: 0, max: N - 1 }), { minLength: 1, maxLength: 3 }),
  hops: fc.integer({ min: 0, max: 4 }),
  maxFollows: fc.integer({ min: 1, max: 8 }),
  batch: fc.integer({ min: 1, max: 6 }),
  shuffleSeed: fc.integer(),
  junk: fc.array(
    fc.oneof(fc.constant(null), fc.string(), fc.integer(), fc.object(), fc.constant({ kind: 3 })),
    { maxLength: 4 },
  ),
});

/** A source answering the authors asked with all their versions, strangers' lists and junk. */
function sourceOf(g: GraphCase) {
  const events = g.versions.map(eventOf);
  let state = g.shuffleSeed >>> 0;
  const rand = () => (state = (state * 1103515245 + 12345) >>> 0) / 2 ** 32;
  return (authors: readonly string[]): Promise<unknown[]> => {
    const asked = new Set(authors);
    const answer: unknown[] = events.filter((e) => asked.has(e.pubkey));
    answer.push(...events.filter((e) => !asked.has(e.pubkey)).slice(0, 2), ...g.junk);
    for (let i = answer.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [answer[i], answer[j]] = [answer[j], answer[i]];
    }
    return Promise.resolve(answer);
  };
}

interface GraphCase {
  versions: Version[];
  seeds: number[];
  hops: number;
  maxFollows: number;
  batch: number;
  shuffleSeed: number;
  junk: unknown[];
}

describe('the follow-graph walk', { timeout: 120_000 }, () => {
  it('reaches exactly the reference BFS over the latest lists', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, async (g: GraphCase) => {
        const bounds = { hops: g.hops, maxPubkeys: 1_000_000, maxFollowsPerList: g.maxFollows };
        const walk = await walkFollowGraph(g.seeds.map(keyOf), bounds, sourceOf(g), g.batch);
        const expected = referenceSet(g.versions, g.seeds, g.hops, g.maxFollows);
        assert.deepEqual([...walk.pubkeys].sort(), [...expected].sort());
        assert.equal(walk.truncated, false);
        // As built, and as the gateway's thread takes it from the worker's (transferred).
        const built = PubkeySet.build(walk.pubkeys);
        const moved = structuredClone(built.transferable, { transfer: [built.transferable] });
        assert.equal(built.size, 0, 'the records moved, not copied');
        for (const set of [PubkeySet.of(walk.pubkeys), PubkeySet.fromPacked(moved)]) {
          assert.equal(set.size, expected.size);
          for (let i = 0; i < N; i++) assert.equal(set.has(keyOf(i)), expected.has(keyOf(i)));
        }
      }),
      propertyParams(300),
    );
  });

  it('stops at maxPubkeys with a subset of the uncapped set', async () => {
    await fc.assert(
      fc.asyncProperty(graphArb, fc.integer({ min: 1, max: N }), async (g: GraphCase, cap) => {
        const bounds = { hops: g.hops, maxPubkeys: cap, maxFollowsPerList: g.maxFollows };
        const walk = await walkFollowGraph(g.seeds.map(keyOf), bounds, sourceOf(g), g.batch);
        const full = referenceSet(g.versions, g.seeds, g.hops, g.maxFollows);
        assert.equal(walk.pubkeys.size, Math.min(cap, full.size));
        assert.equal(walk.truncated, full.size > cap);
        for (const k of walk.pubkeys) assert.ok(full.has(k));
      }),
      propertyParams(200),
    );
  });

  it('reads at most maxFollowsPerList follows of a list, in its order', () => {
    const tags = Array.from({ length: 100_000 }, (_, i) => ['p', keyOf(i)]);
    const list = { kind: 3, tags } as unknown as Event;
    assert.deepEqual(followsOf(list, 3), [keyOf(0), keyOf(1), keyOf(2)]);
  });

  it('packs keys at 32 bytes and refuses what is not a key', () => {
    const set = PubkeySet.of([keyOf(1), keyOf(2), keyOf(1), 'XYZ']);
    assert.equal(set.size, 2);
    assert.equal(set.bytes, 64);
    assert.ok(set.has(keyOf(2)));
    assert.ok(!set.has(keyOf(3)));
    assert.ok(!set.has(keyOf(2).toUpperCase()));
    assert.ok(!PubkeySet.EMPTY.has(keyOf(1)));
  });
});
