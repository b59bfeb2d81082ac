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
import { NostrSocket } from '../oom/nostr-client.js';

/** created_at of a pool's first event; event i is dated EPOCH + i. */
export const EPOCH = 1_700_000_000;

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

/**
 * Store the pool in any Nostr relay over its WebSocket, `parallel` EVENTs in flight, each
 * answered by its OK; a refusal other than duplicate, or no OK in time, stops the run.
 */
export async function storeOverWebSocket(
  wsUrl: string,
  pool: string[],
  parallel = 64,
): Promise<void> {
  const socket = await NostrSocket.open(wsUrl);
  try {
    let next = 0;
    const worker = async () => {
      while (next < pool.length) {
        const json = pool[next++]!;
        const answer = await socket.send((JSON.parse(json) as { id: string }).id, json);
        if (answer.outcome !== 'ok') throw new Error(`relay refused a pool event: ${answer.code}`);
      }
    };
    await Promise.all(Array.from({ length: parallel }, worker));
  } finally {
    socket.close();
  }
}
