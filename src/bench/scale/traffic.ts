/**
 * The simulated clients: Zipf popularity over a live population of identities that arrive
 * and leave, each writing through its own gateway, and one hot key written through every
 * gateway. Identities are drawn, never materialised: a draw is a rank, a rank maps to the
 * identity holding it now.
 */

/** H(x) of the continuous Zipf approximation, exponent s: integral of t^-s from 1 to x (+1). */
function bigH(x: number, s: number): number {
  return s === 1 ? Math.log(x) + 1 : (Math.pow(x, 1 - s) - 1) / (1 - s) + 1;
}

function bigHInverse(y: number, s: number): number {
  return s === 1 ? Math.exp(y - 1) : Math.pow((y - 1) * (1 - s) + 1, 1 / (1 - s));
}

/**
 * A rank in [1, n] with P(rank k) roughly proportional to k^-s (inverse transform of the
 * continuous approximation, exact enough for popularity: rank 1 gets 1/H(n) of the draws).
 */
export function zipfRank(u: number, n: number, s: number): number {
  const lo = bigH(0.5, s);
  const hi = bigH(n + 0.5, s);
  const x = bigHInverse(lo + u * (hi - lo), s);
  return Math.min(n, Math.max(1, Math.round(x)));
}

/** The share of all draws rank 1 gets (the most popular identity). */
export function topShare(n: number, s: number): number {
  let h = 0;
  for (let k = 1; k <= Math.min(n, 1_000_000); k++) h += Math.pow(k, -s);
  if (n > 1_000_000) h += bigH(n + 0.5, s) - bigH(1_000_000.5, s);
  return 1 / h;
}

const GOLDEN = 0.6180339887498949;

/**
 * The identity holding `rank` at `tMs`: each rank is handed to a new identity every
 * 1000 / churnPerSec ms (at a phase of its own), so identities keep arriving and leaving
 * while the live population stays `n`. Identity ids are unique across time.
 */
export function identityAt(rank: number, n: number, tMs: number, churnPerSec: number): number {
  if (!(churnPerSec > 0)) return rank;
  const phase = (rank * GOLDEN) % 1;
  const epoch = Math.floor((tMs / 1000) * churnPerSec + phase);
  return rank + n * epoch;
}

/** The gateway an identity writes through (sticky: its connection is to one gateway). */
export function gatewayOf(identity: number, gateways: number): number {
  // A multiplicative hash: ids of neighbouring ranks land on different gateways.
  return Math.floor((((identity * 2654435761) >>> 0) / 4294967296) * gateways);
}

/** The counter key part of an identity: a hash tag, as clientKey() gives one. */
export function identityKey(identity: number): string {
  return `{i${identity.toString(36)}}`;
}

export const HOT_IDENTITY = -1;
export const HOT_KEY = '{hot}';

/** What the traffic shape needs of a configuration. */
export interface TrafficShape {
  gateways: number;
  workers: number;
  identities: number;
  zipf: number;
  hotShare: number;
  churnPerSec: number;
}

/** One write: the client's key part and the gateway process (gateway x workers + worker) it goes through. */
export interface DrawnWrite {
  client: string;
  holder: number;
}

/**
 * The next write at `tRelMs` into the run, from `random`: the simulation and the real
 * validation run draw the same sequence from the same seed.
 */
export function drawWrite(random: () => number, s: TrafficShape, tRelMs: number): DrawnWrite {
  const worker = s.workers > 1 ? Math.floor(random() * s.workers) : 0;
  if (random() < s.hotShare) {
    return { client: HOT_KEY, holder: Math.floor(random() * s.gateways) * s.workers + worker };
  }
  const rank = zipfRank(random(), s.identities, s.zipf);
  const id = identityAt(rank, s.identities, tRelMs, s.churnPerSec);
  return { client: identityKey(id), holder: gatewayOf(id, s.gateways) * s.workers + worker };
}

/** Writes due in a tick of `tickMs` at `perSec`, with the fraction carried to the next tick. */
export function writesDue(carry: number, perSec: number, tickMs: number): [number, number] {
  const due = carry + (perSec * tickMs) / 1000;
  const n = Math.floor(due);
  return [n, due - n];
}
