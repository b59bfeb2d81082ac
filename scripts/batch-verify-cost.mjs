#!/usr/bin/env node
/* global console, process, Buffer */
// CPU per Nostr EVENT of BIP-340 batch verification against the gateway's one-at-a-time
// verifier (issue 32: "BIP-340 batch verification over the events waiting at that moment").
// No package on npm verifies BIP-340 in batches in WebAssembly or native code (libsecp256k1's
// batch module is not merged), so the batch is built here on @noble/curves (nostr-tools'
// engine): lift_x of every R and P, one multi-scalar multiplication (Pippenger) with random
// weights, as BIP-340's "Batch Verification" gives it. Every arm checks the event's id first.
//   node scripts/batch-verify-cost.mjs [DIST] [--sizes 16,64,256] [--rounds 3]
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { pippenger } from '@noble/curves/abstract/curve.js';
import { schnorr } from '@noble/curves/secp256k1.js';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';

const args = process.argv.slice(2);
const flag = (name, dflt) => {
  const at = args.indexOf(name);
  return at >= 0 ? args[at + 1] : dflt;
};
const sizes = flag('--sizes', '16,64,256').split(',').map(Number);
const rounds = Number(flag('--rounds', '3'));
const root = resolve(
  args.find((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--')) ?? 'dist',
);
const { initSignatureVerifier, verifySignature, eventIdMatches, signatureVerifier } = await import(
  `${root}/src/nostr/verify.js`
);
await initSignatureVerifier();

const { Point, utils } = schnorr;
const { Fn } = Point;
const big = (bytes) => BigInt(`0x${Buffer.from(bytes).toString('hex')}`);

/** BIP-340 batch verification: true only if every signature verifies (ids checked first). */
function batchVerify(events) {
  const points = [];
  const scalars = [];
  let sSum = 0n;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (!eventIdMatches(e)) return false;
    const sig = Buffer.from(e.sig, 'hex');
    const pk = Buffer.from(e.pubkey, 'hex');
    const msg = Buffer.from(e.id, 'hex');
    let P, R;
    try {
      P = utils.lift_x(big(pk));
      R = utils.lift_x(big(sig.subarray(0, 32)));
    } catch {
      return false;
    }
    const s = big(sig.subarray(32));
    if (s >= Fn.ORDER) return false;
    const c = Fn.create(big(utils.taggedHash('BIP0340/challenge', sig.subarray(0, 32), pk, msg)));
    // The first weight is 1, the others random (128 bits are enough, BIP-340 says 256 work).
    const a = i === 0 ? 1n : Fn.create(big(randomBytes(16)) + 1n);
    sSum = Fn.create(sSum + a * s);
    points.push(R, P);
    scalars.push(a, Fn.create(a * c));
  }
  points.push(Point.BASE);
  scalars.push(Fn.neg(sSum));
  return pippenger(Point, points, scalars).is0();
}

const keys = Array.from({ length: 64 }, () => generateSecretKey());
const now = Math.floor(Date.now() / 1000);
const sign = (n) =>
  Array.from({ length: n }, (_, i) =>
    finalizeEvent(
      { kind: 1, created_at: now, tags: [], content: `note ${i} `.repeat(20) },
      keys[i % 64],
    ),
  );
// A fresh copy per pass: nostr-tools marks events it signed as verified.
const copies = (events) => events.map((e) => ({ ...e, tags: [...e.tags] }));
/** One forgery (a signature's last digit changed) among valid events. */
const withForgery = (events) => {
  const out = copies(events);
  const e = out[out.length >> 1];
  e.sig = e.sig.slice(0, -1) + (e.sig.endsWith('0') ? '1' : '0');
  return out;
};
function cpuPerEvent(events, verify) {
  const list = copies(events);
  const start = process.cpuUsage();
  verify(list);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / events.length;
}
const oneAtATime = (list) => list.every((e) => verifySignature(e));
const nobleEach = (list) =>
  list.every(
    (e) =>
      eventIdMatches(e) &&
      schnorr.verify(
        Buffer.from(e.sig, 'hex'),
        Buffer.from(e.id, 'hex'),
        Buffer.from(e.pubkey, 'hex'),
      ),
  );
// A batch that fails says only that one of its events is forged: then each is verified alone.
const batchThenEach = (list) =>
  batchVerify(list) || list.map((e) => verifySignature(e)).every(Boolean);

console.log(
  `gateway verifier: ${signatureVerifier()}; rounds ${rounds}; CPU µs per event, median of rounds`,
);
console.log(
  'events | gateway, one at a time | noble, one at a time | noble, BIP-340 batch | batch with one forgery, then each',
);
for (const n of sizes) {
  const valid = sign(n);
  const forged = withForgery(valid);
  if (
    !batchVerify(copies(valid)) ||
    batchVerify(forged) ||
    !oneAtATime(copies(valid)) ||
    oneAtATime(forged)
  ) {
    throw new Error('a verifier disagrees: not timed');
  }
  const arms = { gateway: [], noble: [], batch: [], forged: [] };
  batchVerify(copies(valid)); // warm up
  for (let r = 0; r < rounds; r++) {
    arms.gateway.push(cpuPerEvent(valid, oneAtATime));
    arms.noble.push(cpuPerEvent(valid, nobleEach));
    arms.batch.push(cpuPerEvent(valid, batchVerify));
    arms.forged.push(cpuPerEvent(forged, batchThenEach));
  }
  const median = (xs) => xs.sort((a, b) => a - b)[xs.length >> 1].toFixed(0);
  console.log(
    `${n} | ${median(arms.gateway)} | ${median(arms.noble)} | ${median(arms.batch)} | ${median(arms.forged)}`,
  );
}
