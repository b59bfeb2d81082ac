/**
 * A worker thread of `VerifyPool`: verifies each batch of events it is sent with the gateway's
 * verifier and answers with one verdict byte per event, in order.
 */
import { parentPort } from 'node:worker_threads';
import type { Event } from 'nostr-tools/pure';
import { initSignatureVerifier, verifySignature } from '../nostr/verify.js';

export interface VerifyBatch {
  seq: number;
  events: Event[];
}

export interface VerifyVerdicts {
  seq: number;
  /** 1 where the event verified, 0 where not. */
  verdicts: Uint8Array;
}

const port = parentPort;
if (!port) throw new Error('verify-worker.js runs as a worker thread');
await initSignatureVerifier();
port.on('message', ({ seq, events }: VerifyBatch) => {
  const verdicts = new Uint8Array(events.length);
  for (let i = 0; i < events.length; i++) verdicts[i] = verifySignature(events[i]!) ? 1 : 0;
  port.postMessage({ seq, verdicts } satisfies VerifyVerdicts, [verdicts.buffer]);
});
port.postMessage('ready');
