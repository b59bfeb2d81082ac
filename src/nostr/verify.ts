/**
 * NIP-01 event verification: the id must be the sha256 of the event's serialisation, and the
 * signature a BIP-340 schnorr signature of that id by the pubkey.
 *
 * The schnorr check runs in libsecp256k1 compiled to WebAssembly (nostr-wasm), several times
 * less CPU than nostr-tools' pure-JS one: call `initSignatureVerifier()` once before serving.
 * Until then, and for events too large for the WebAssembly heap, nostr-tools does it.
 */
import { createHash } from 'node:crypto';
import { initNostrWasm } from 'nostr-wasm';
import type { Nostr } from 'nostr-wasm';
import { verifyEvent as verifyWithNostrTools } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';

/**
 * nostr-wasm copies the serialisation into a heap that cannot grow (about 945 KB free in
 * 0.1.0; beyond it `verifyEvent` throws "Out of memory"). Larger events go to nostr-tools.
 */
const WASM_MAX_SERIALIZED_BYTES = 512 * 1024;

const LOWER_HEX_64 = /^[0-9a-f]{64}$/;
/** nostr-tools reads the signature's hex in either case; so do we, to keep its verdicts. */
const HEX_128 = /^[0-9a-fA-F]{128}$/;

let wasm: Nostr | undefined;
let initialising: Promise<void> | undefined;

/** Instantiate the WebAssembly verifier (about 25 ms, once; later calls share the first). */
export function initSignatureVerifier(): Promise<void> {
  initialising ??= initNostrWasm().then(
    (instance) => {
      wasm = instance;
    },
    (err: unknown) => {
      initialising = undefined;
      throw err;
    },
  );
  return initialising;
}

/** Which implementation checks signatures now. */
export function signatureVerifier(): 'nostr-wasm' | 'nostr-tools' {
  return wasm ? 'nostr-wasm' : 'nostr-tools';
}

/**
 * True when the event's id is the hash of its content and its signature is the pubkey's over
 * that id. Never throws: anything malformed is simply false.
 */
export function verifySignature(event: Event): boolean {
  // nostr-wasm trusts its input: a short id skips its id check, a short or long pubkey or
  // signature reads stale bytes or overwrites its heap. Only exact lowercase hex goes in.
  if (!isWellFormed(event)) return false;
  const serialized = serialize(event);
  // nostr-wasm hashes too, but checking here with node's native sha256 keeps the id check
  // independent of its hex parsing and gives the size that decides where the event fits.
  if (!hashIs(serialized, event.id)) return false;
  if (!wasm || serialized.length > WASM_MAX_SERIALIZED_BYTES) {
    // A fresh object: nostr-tools trusts (and sets) a "verified" symbol on the one it gets.
    const { id, pubkey, created_at, kind, tags, content, sig } = event;
    return verifyWithNostrTools({ id, pubkey, created_at, kind, tags, content, sig });
  }
  try {
    wasm.verifyEvent(event);
    return true;
  } catch {
    return false;
  }
}

/**
 * True when the event's id is the sha256 of its NIP-01 serialisation: a few microseconds per
 * KiB, no curve arithmetic. What proof of work is judged on: an id is only work once it is
 * the event's own hash.
 */
export function eventIdMatches(event: Event): boolean {
  return isWellFormed(event) && hashIs(serialize(event), event.id);
}

function serialize(event: Event): Buffer {
  return Buffer.from(
    JSON.stringify([0, event.pubkey, event.created_at, event.kind, event.tags, event.content]),
  );
}

function hashIs(serialized: Buffer, id: string): boolean {
  return createHash('sha256').update(serialized).digest('hex') === id;
}

/**
 * The fields the serialisation and the signature read, with their NIP-01 types. kind and
 * created_at must be finite: nostr-wasm writes them with String(), nostr-tools with JSON.
 */
function isWellFormed(event: Event): boolean {
  if (typeof event !== 'object' || event === null) return false;
  const { id, pubkey, sig, content, kind, created_at, tags } = event as Partial<
    Record<keyof Event, unknown>
  >;
  return (
    typeof id === 'string' &&
    LOWER_HEX_64.test(id) &&
    typeof pubkey === 'string' &&
    LOWER_HEX_64.test(pubkey) &&
    typeof sig === 'string' &&
    HEX_128.test(sig) &&
    typeof content === 'string' &&
    typeof kind === 'number' &&
    Number.isFinite(kind) &&
    typeof created_at === 'number' &&
    Number.isFinite(created_at) &&
    Array.isArray(tags) &&
    tags.every((tag) => Array.isArray(tag) && tag.every((value) => typeof value === 'string'))
  );
}
