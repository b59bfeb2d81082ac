import { createHash } from 'node:crypto';
import { verifyEvent } from 'nostr-tools/pure';
import type { NostrEvent } from 'nostr-tools/pure';

export type RejectReason = 'malformed' | 'too_large' | 'bad_id' | 'bad_signature';
export const REJECT_REASONS: readonly RejectReason[] = [
  'malformed',
  'too_large',
  'bad_id',
  'bad_signature',
];

export type Verdict =
  | { ok: true; event: NostrEvent; json: string; bytes: number }
  | { ok: false; id: string; reason: RejectReason; message: string };

const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;

/**
 * The stored form of an event: only the NIP-01 fields, in a fixed order (the data file's
 * restart scan relies on id, pubkey, created_at and kind coming first).
 */
export function canonicalJson(e: NostrEvent): string {
  return JSON.stringify({
    id: e.id,
    pubkey: e.pubkey,
    created_at: e.created_at,
    kind: e.kind,
    tags: e.tags,
    content: e.content,
    sig: e.sig,
  });
}

/**
 * Check shape, size, id and signature; the cheap checks run first. `verifySignatures` false
 * (`sluice relay --no-verify-signatures`) skips the last: a relay that does not verify, for
 * tests of what a gateway in front of one lets through.
 */
export function checkEvent(
  raw: unknown,
  maxEventBytes: number,
  isKnown: (id: string) => boolean = () => false,
  verifySignatures = true,
): Verdict {
  const shapeError = shapeProblem(raw);
  const id = isRecord(raw) && typeof raw.id === 'string' && HEX64.test(raw.id) ? raw.id : '';
  if (shapeError) return reject(id, 'malformed', shapeError);
  const event = raw as NostrEvent;
  const json = canonicalJson(event);
  const size = Buffer.byteLength(json);
  if (size > maxEventBytes) {
    return reject(id, 'too_large', `event is ${size} bytes, the limit is ${maxEventBytes}`);
  }
  // NIP-01 id: sha256 of the serialisation. Node's hash is ~30x faster than the JS one that
  // verifyEvent uses, so a forged id is turned away before any curve arithmetic.
  const serialised = JSON.stringify([
    0,
    event.pubkey,
    event.created_at,
    event.kind,
    event.tags,
    event.content,
  ]);
  if (createHash('sha256').update(serialised).digest('hex') !== event.id) {
    return reject(id, 'bad_id', 'event id does not match its content');
  }
  // The id commits to the content, so a known id is content already verified once: answer it
  // as a duplicate without the curve arithmetic (floods of replays stay cheap).
  if (isKnown(event.id) || !verifySignatures) return { ok: true, event, json, bytes: size };
  // A fresh object: verifyEvent trusts a "verified" mark an in-process caller's event may carry.
  const { pubkey, created_at, kind, tags, content, sig } = event;
  if (!verifyEvent({ id: event.id, pubkey, created_at, kind, tags, content, sig }))
    return reject(id, 'bad_signature', 'signature verification failed');
  return { ok: true, event, json, bytes: size };
}

function reject(id: string, reason: RejectReason, text: string): Verdict {
  return { ok: false, id, reason, message: `invalid: ${text}` };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function shapeProblem(raw: unknown): string | undefined {
  if (!isRecord(raw)) return 'event must be a JSON object';
  if (typeof raw.id !== 'string' || !HEX64.test(raw.id)) {
    return 'id must be 64 lowercase hex characters';
  }
  if (typeof raw.pubkey !== 'string' || !HEX64.test(raw.pubkey)) {
    return 'pubkey must be 64 lowercase hex characters';
  }
  if (typeof raw.sig !== 'string' || !HEX128.test(raw.sig)) {
    return 'sig must be 128 lowercase hex characters';
  }
  if (!Number.isInteger(raw.kind) || (raw.kind as number) < 0 || (raw.kind as number) > 65535) {
    return 'kind must be an integer from 0 to 65535';
  }
  if (!Number.isSafeInteger(raw.created_at) || (raw.created_at as number) < 0) {
    return 'created_at must be a non-negative integer';
  }
  if (
    !Array.isArray(raw.tags) ||
    !raw.tags.every((tag) => Array.isArray(tag) && tag.every((v) => typeof v === 'string'))
  ) {
    return 'tags must be an array of arrays of strings';
  }
  if (typeof raw.content !== 'string') return 'content must be a string';
  return undefined;
}
