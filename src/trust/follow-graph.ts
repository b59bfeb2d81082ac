/**
 * The pubkeys within `hops` follow-list hops of the seeds (NIP-02 kind 3), walked hop by hop
 * through a `fetch` of follow lists (the relay, over REQ: follow-reader.ts). Pure of I/O:
 * what the walk trusts of an answer, and every bound, is here.
 *
 * - Only the latest list of an author counts (kind 3 is replaceable: the highest created_at,
 *   then the lowest id, as NIP-01 says); an answer may hold older versions and strangers'.
 * - Only lists of pubkeys already in the set are read: a fresh key enters only when someone
 *   inside follows it, however many lists it publishes.
 * - At most `maxFollowsPerList` p-tags of a list (in the list's order: the rest are dropped)
 *   and at most `maxPubkeys` in all (the walk stops adding, the set is marked truncated).
 */
import type { Event } from 'nostr-tools/pure';

export interface WalkBounds {
  hops: number;
  maxPubkeys: number;
  maxFollowsPerList: number;
}

/** Follow lists of some authors: whatever the source holds (versions, strangers, junk). */
export type FetchFollowLists = (authors: readonly string[]) => Promise<readonly unknown[]>;

export interface WalkResult {
  pubkeys: Set<string>;
  /** Pubkeys first reached at each hop (index 0: the seeds). */
  perHop: number[];
  /** Follow lists read (one an author at most) and p-tags read from them. */
  lists: number;
  edges: number;
  /** Events answered that did not count: junk, strangers, not kind 3, older versions. */
  ignored: number;
  /** Whether maxPubkeys stopped the walk adding pubkeys. */
  truncated: boolean;
}

const HEX_KEY = /^[0-9a-f]{64}$/;

/** A kind-3 event's shape, checked field by field (anything may come over a socket). */
export function isFollowList(value: unknown): value is Event {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Record<string, unknown>;
  return (
    e.kind === 3 &&
    typeof e.pubkey === 'string' &&
    HEX_KEY.test(e.pubkey) &&
    typeof e.id === 'string' &&
    typeof e.sig === 'string' &&
    Number.isSafeInteger(e.created_at) &&
    Array.isArray(e.tags)
  );
}

/** NIP-01: of two versions of a replaceable event, the newer; on a tie, the lower id. */
export function newerOf(a: Event, b: Event): Event {
  if (a.created_at !== b.created_at) return a.created_at > b.created_at ? a : b;
  return a.id <= b.id ? a : b;
}

/** The followed pubkeys of a list: `["p", <64 hex>, ...]` tags, the first `max` distinct. */
export function followsOf(list: Event, max: number): string[] {
  const follows = new Set<string>();
  for (const tag of list.tags as unknown[]) {
    if (follows.size >= max) break;
    if (!Array.isArray(tag) || tag[0] !== 'p' || typeof tag[1] !== 'string') continue;
    const hex = tag[1].toLowerCase();
    if (HEX_KEY.test(hex)) follows.add(hex);
  }
  return [...follows];
}

/** Each asked author's latest list among `answer`; everything else is counted as ignored. */
export function latestLists(
  answer: readonly unknown[],
  asked: ReadonlySet<string>,
  accept: (event: Event) => boolean,
): { lists: Map<string, Event>; ignored: number } {
  const lists = new Map<string, Event>();
  let ignored = 0;
  for (const value of answer) {
    if (!isFollowList(value) || !asked.has(value.pubkey) || !accept(value)) {
      ignored++;
      continue;
    }
    const held = lists.get(value.pubkey);
    if (held !== undefined) ignored++;
    lists.set(value.pubkey, held === undefined ? value : newerOf(held, value));
  }
  return { lists, ignored };
}

/**
 * Walk the graph. `fetch` is given the authors of one hop in batches of at most `batch`;
 * `accept` judges an event before it counts (its signature, when the gateway checks them).
 */
export async function walkFollowGraph(
  seeds: readonly string[],
  bounds: WalkBounds,
  fetch: FetchFollowLists,
  batch: number,
  accept: (event: Event) => boolean = () => true,
): Promise<WalkResult> {
  const pubkeys = new Set<string>();
  const result: WalkResult = {
    pubkeys,
    perHop: [],
    lists: 0,
    edges: 0,
    ignored: 0,
    truncated: false,
  };
  /** Add a pubkey not held yet, under maxPubkeys, to the set and to `reached`. */
  const admit = (pubkey: string, reached: string[]) => {
    if (pubkeys.has(pubkey)) return;
    if (pubkeys.size >= bounds.maxPubkeys) {
      result.truncated = true;
      return;
    }
    pubkeys.add(pubkey);
    reached.push(pubkey);
  };
  let frontier: string[] = [];
  for (const seed of seeds) admit(seed, frontier);
  result.perHop.push(frontier.length);
  for (let hop = 1; hop <= bounds.hops && frontier.length > 0; hop++) {
    const next: string[] = [];
    for (let i = 0; i < frontier.length; i += batch) {
      const asked = frontier.slice(i, i + batch);
      const found = latestLists(await fetch(asked), new Set(asked), accept);
      result.ignored += found.ignored;
      // In the order asked, so which pubkeys a cap keeps does not depend on the answer's order.
      for (const author of asked) {
        const list = found.lists.get(author);
        if (list === undefined) continue;
        result.lists++;
        const follows = followsOf(list, bounds.maxFollowsPerList);
        result.edges += follows.length;
        for (const followed of follows) admit(followed, next);
      }
    }
    result.perHop.push(next.length);
    frontier = next;
  }
  return result;
}
