/**
 * A worker thread of fresh-events.ts: signs events from..to-1 of one slice with nostr-wasm
 * (libsecp256k1) and posts back their ids and serialisations.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { initNostrWasm } from 'nostr-wasm';
import { authorKey, authorOf } from './fresh-events.js';
import type { SignJob } from './fresh-events.js';

const job = workerData as SignJob;
const nw = await initNostrWasm();
const keys = new Map<number, Uint8Array>();
const filler = 'x'.repeat(job.fillerBytes);
const ids: string[] = [];
const events: string[] = [];
for (let i = job.from; i < job.to; i++) {
  const a = authorOf(i, job.authors);
  let sk = keys.get(a);
  if (!sk) {
    sk = authorKey(job.seed, a);
    keys.set(a, sk);
  }
  const event = {
    kind: 1,
    created_at: job.createdAt,
    tags: [] as string[][],
    content: `${job.label} #${i} ${filler}`,
    pubkey: '',
    id: '',
    sig: '',
  };
  nw.finalizeEvent(event, sk);
  ids.push(event.id);
  events.push(JSON.stringify(event));
}
parentPort!.postMessage({ ids, events });
