import { createHash } from 'node:crypto';

/**
 * The "heavy" workload: `iterations` rounds of sha256 over the event bytes, each round
 * chained to the previous digest. The caller keeps the result (it is published in /stats),
 * so the work cannot be skipped.
 */
export function burnCpu(data: Buffer, iterations: number, seed: Buffer): Buffer {
  let digest = seed;
  for (let i = 0; i < iterations; i++) {
    digest = createHash('sha256').update(digest).update(data).digest();
  }
  return digest;
}
