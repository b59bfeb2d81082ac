/**
 * The spam wave's hardware: one thread that signs events of fresh keys as fast as it can,
 * each mined to the difficulty it was last told (NIP-13), and posts them to its parent.
 * Parent -> worker: { difficulty } (and { stop: true }). Worker -> parent: an event's JSON.
 */
import { parentPort } from 'node:worker_threads';
import { minePow } from 'nostr-tools/nip13';
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';

let difficulty = 0;
let stopped = false;
let n = 0;

parentPort!.on('message', (m: { difficulty?: number; stop?: boolean }) => {
  if (m.stop) stopped = true;
  if (m.difficulty !== undefined) difficulty = m.difficulty;
});

function one(): string {
  const sk = generateSecretKey();
  const unsigned = {
    kind: 1,
    created_at: Math.floor(Date.now() / 1000),
    tags: [] as string[][],
    content: `spam ${n++}`,
    pubkey: getPublicKey(sk),
  };
  const mined = difficulty > 0 ? minePow(unsigned, difficulty) : unsigned;
  return JSON.stringify(finalizeEvent(mined, sk));
}

/** One event a turn, so the difficulty's updates and the stop are read between them. */
function loop(): void {
  if (stopped) return;
  parentPort!.postMessage(one());
  setImmediate(loop);
}
loop();
