/**
 * The worker thread of one nostr.trust refresh (trust-graph.ts starts one a refresh): the
 * walk's REQs, the parsing of its answers, the lists' signature checks and the packed set's
 * building, off the gateway's thread. It answers once: the walk's figures with the set's
 * records transferred (not copied), or the walk's error; then it ends.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { initSignatureVerifier, verifySignature } from '../nostr/verify.js';
import { walkFollowGraph } from './follow-graph.js';
import { PubkeySet } from './pubkey-set.js';
import { RelayFollowSource } from './relay-follow-source.js';
import type { WalkDone, WalkTask } from './trust-graph.js';

const { settings, url, deadline } = workerData as WalkTask;
const source = new RelayFollowSource({
  url,
  maxEventBytes: settings.maxEventBytes,
  limit: settings.authorsPerReq,
  deadline,
});
let done: WalkDone;
try {
  // A WebAssembly instance of this thread's own (about 25 ms): isolates share none.
  if (settings.verifySignatures) await initSignatureVerifier();
  const accept = settings.verifySignatures ? verifySignature : () => true;
  const fetch = (authors: readonly string[]) => source.fetch(authors);
  const batch = settings.authorsPerReq;
  const { pubkeys, ...walk } = await walkFollowGraph(
    settings.seeds,
    settings,
    fetch,
    batch,
    accept,
  );
  const records = PubkeySet.build(pubkeys).transferable;
  done = { ok: true, records, ...walk, oversized: source.oversized, requests: source.requests };
} catch (err) {
  done = { ok: false, error: (err as Error).message };
} finally {
  source.close(true);
}
parentPort!.postMessage(done, done.ok ? [done.records] : []);
