/**
 * Events that are new to the relay and to the gateway, for the Nostr workload: re-sending a
 * pool the relay already holds makes every write a duplicate, which the gateway answers
 * itself from its seen-ids check, so the gateway would look faster than the relay it fronts.
 *
 * Each run signs its own slice before its warm-up (never timed): `count` events signed by
 * `authors` distinct keys (so no one author's quota is what limits the load), with the run's
 * label and a nonce in every content, so no two runs, even of the same configuration in
 * another session against a long-lived relay, share an id. The load takes them in order and
 * fails loudly when they run out; it never wraps around to ids it has sent.
 *
 * Signing runs in worker threads with nostr-wasm (libsecp256k1 in WebAssembly, several
 * times faster than nostr-tools' pure-JS signer).
 */
import { createHash, randomBytes } from 'node:crypto';
import os from 'node:os';
import { Worker } from 'node:worker_threads';

export interface SignJob {
  seed: number;
  authors: number;
  label: string;
  from: number;
  to: number;
  createdAt: number;
  fillerBytes: number;
}

/** Author `a`'s secret key in session seed `seed` (a valid scalar but with ~2^-128 odds). */
export function authorKey(seed: number, a: number): Uint8Array {
  return new Uint8Array(createHash('sha256').update(`sluice-bench-author-${seed}-${a}`).digest());
}

/** Which of `authors` keys signs event `i` of a session's fresh events. */
export function authorOf(i: number, authors: number): number {
  return i % authors;
}

/** A slice of fresh events, consumed in order by the load (`next` is the cursor). */
export interface FreshEvents {
  ids: string[];
  events: string[];
  next: number;
}

export interface FreshEventsPlan {
  count: number;
  authors: number;
  seed: number;
  /** Names the run: part of every event's content. */
  label: string;
  /** Approximate content size (the pool's is 64). */
  contentBytes?: number;
  /** Worker threads (default: the cores, at most 4). */
  workers?: number;
  /**
   * The session index of the slice's first event (default 0): a later slice of the same run
   * continues the indexes, so its events take the authors after the earlier slice's (a run
   * with as many authors as events never signs two events with one key).
   */
  from?: number;
}

const MIN_PER_WORKER = 2000;

export async function signFreshEvents(plan: FreshEventsPlan): Promise<FreshEvents> {
  if (!Number.isInteger(plan.count) || plan.count < 1) {
    throw new RangeError(`fresh events: count must be a positive integer, got ${plan.count}`);
  }
  if (!Number.isInteger(plan.authors) || plan.authors < 1) {
    throw new RangeError(`fresh events: authors must be a positive integer, got ${plan.authors}`);
  }
  const nonce = randomBytes(6).toString('hex');
  const label = `sluice bench ${plan.label} ${nonce}`;
  const fillerBytes = Math.max(0, (plan.contentBytes ?? 64) - label.length - 10);
  const createdAt = Math.floor(Date.now() / 1000);
  const workers = Math.max(
    1,
    Math.min(
      plan.workers ?? Math.min(4, os.availableParallelism()),
      Math.ceil(plan.count / MIN_PER_WORKER),
    ),
  );
  const per = Math.ceil(plan.count / workers);
  const first = plan.from ?? 0;
  if (!Number.isInteger(first) || first < 0) {
    throw new RangeError(`fresh events: from must be a non-negative integer, got ${plan.from}`);
  }
  const parts = await Promise.all(
    Array.from({ length: workers }, (_, w) => {
      const job: SignJob = {
        seed: plan.seed,
        authors: plan.authors,
        label,
        from: first + w * per,
        to: first + Math.min(plan.count, (w + 1) * per),
        createdAt,
        fillerBytes,
      };
      return new Promise<{ ids: string[]; events: string[] }>((resolve, reject) => {
        const worker = new Worker(new URL('./sign-worker.js', import.meta.url), {
          workerData: job,
        });
        let result: { ids: string[]; events: string[] } | undefined;
        worker.once('message', (m: { ids: string[]; events: string[] }) => (result = m));
        worker.once('error', reject);
        worker.once('exit', (code) =>
          result ? resolve(result) : reject(new Error(`signing worker exited with ${code}`)),
        );
      });
    }),
  );
  const ids = parts.flatMap((p) => p.ids);
  const events = parts.flatMap((p) => p.events);
  if (new Set(ids).size !== ids.length) throw new Error('fresh events: duplicate ids in a slice');
  return { ids, events, next: 0 };
}
