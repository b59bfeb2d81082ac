/**
 * The events the load writes: a fixed pool of signed Nostr events, the same for every run with
 * the same seed (key and timestamps are derived from it), so a relay that already holds the pool
 * answers each write after its id check and the relay's cost stays equal across runs.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { finalizeEvent } from 'nostr-tools/pure';
import { runDir } from '../../harness/paths.js';

const EPOCH = 1_700_000_000;

export function signPool(size: number, seed: number, contentBytes: number): string[] {
  const sk = new Uint8Array(createHash('sha256').update(`sluice-bench-${seed}`).digest());
  const filler = 'x'.repeat(Math.max(0, contentBytes - 12));
  return Array.from({ length: size }, (_, i) =>
    JSON.stringify(
      finalizeEvent(
        { kind: 1, created_at: EPOCH + i, tags: [], content: `bench ${i} ${filler}` },
        sk,
      ),
    ),
  );
}

/** The pool, signed once and kept under the run directory (signing costs ~1 ms an event). */
export function eventPool(size: number, seed: number, contentBytes = 64): string[] {
  const file = path.join(runDir(), 'bench', `event-pool-${seed}-${size}-${contentBytes}.json`);
  try {
    const cached = JSON.parse(readFileSync(file, 'utf8')) as unknown;
    if (Array.isArray(cached) && cached.length === size) return cached as string[];
  } catch {
    // Not there yet (or unreadable): sign it.
  }
  const pool = signPool(size, seed, contentBytes);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, JSON.stringify(pool));
  renameSync(`${file}.tmp`, file);
  return pool;
}

/** Send the pool to a relay, a few at a time; a refusal stops the run with the relay's answer. */
export async function preload(relayUrl: string, pool: string[], parallel = 16): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < pool.length) {
      const body = pool[next++]!;
      const res = await fetch(`${relayUrl}/events`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`relay refused a pool event: ${res.status} ${text}`);
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}
