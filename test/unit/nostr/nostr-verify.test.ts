/**
 * The gateway's event verifier (nostr-wasm behind strict input checks): valid events pass,
 * any single tampered field fails, malformed input is false and never a throw, and its
 * verdicts agree with nostr-tools' on generated events.
 *
 * A property failure prints fast-check's seed; replay it with SLUICE_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { inspect, isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { finalizeEvent, generateSecretKey, getPublicKey, verifyEvent } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';
import {
  initSignatureVerifier,
  signatureVerifier,
  verifySignature,
} from '../../../src/nostr/verify.js';
import { propertyParams } from '../../helpers/property-params.js';

const KEYS = Array.from({ length: 4 }, () => generateSecretKey());

/** A signed event as a client would send it: parsed from JSON, so it carries no cache. */
function signed(fields: Partial<Event> = {}, key = KEYS[0]!): Event {
  const event = finalizeEvent(
    {
      kind: fields.kind ?? 1,
      created_at: fields.created_at ?? 1_700_000_000,
      tags: fields.tags ?? [['t', 'sluice']],
      content: fields.content ?? 'hello ✓ "quoted" \\ \u0001',
    },
    key,
  );
  return fresh(event);
}

function fresh<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** The same hex string with its last character changed (still hex, same length). */
function flipLast(hex: string): string {
  return hex.slice(0, -1) + (hex.at(-1) === '0' ? '1' : '0');
}

const VALID = signed();
const OTHER = signed({ content: 'another note' }, KEYS[1]);

/** Each field changed alone, keeping its type and format. */
const SINGLE_FIELD_TAMPERS: Record<string, (e: Event) => Event> = {
  id: (e) => ({ ...e, id: flipLast(e.id) }),
  'id of another event': (e) => ({ ...e, id: OTHER.id }),
  pubkey: (e) => ({ ...e, pubkey: OTHER.pubkey }),
  'sig (r half)': (e) => ({ ...e, sig: flipLast(e.sig.slice(0, 64)) + e.sig.slice(64) }),
  'sig (s half)': (e) => ({ ...e, sig: flipLast(e.sig) }),
  'sig of another event': (e) => ({ ...e, sig: OTHER.sig }),
  content: (e) => ({ ...e, content: `${e.content}!` }),
  tags: (e) => ({ ...e, tags: [...e.tags, ['p', OTHER.pubkey]] }),
  'tag value': (e) => ({ ...e, tags: [['t', 'other']] }),
  created_at: (e) => ({ ...e, created_at: e.created_at + 1 }),
  kind: (e) => ({ ...e, kind: e.kind + 1 }),
};

describe('event verification', { timeout: 120_000 }, () => {
  before(async () => {
    await initSignatureVerifier();
  });

  it('uses nostr-wasm once initialised', () => {
    assert.equal(signatureVerifier(), 'nostr-wasm');
  });

  it('accepts valid events, with and without tags, of several kinds', () => {
    assert.equal(verifySignature(VALID), true);
    assert.equal(verifySignature(OTHER), true);
    assert.equal(verifySignature(signed({ tags: [], kind: 0, content: '' })), true);
    assert.equal(verifySignature(signed({ kind: 30023, tags: [['d', 'x'], ['e']] })), true);
  });

  for (const [field, tamper] of Object.entries(SINGLE_FIELD_TAMPERS)) {
    it(`rejects an event whose ${field} was changed`, () => {
      assert.equal(verifySignature(tamper(fresh(VALID))), false);
      assert.equal(verifyEvent(tamper(fresh(VALID))), false, 'nostr-tools agrees');
    });
  }

  it('rejects a tampered copy of an event nostr-tools signed (its "verified" cache is not trusted)', () => {
    const own = finalizeEvent({ kind: 1, created_at: 1, tags: [], content: 'x' }, KEYS[0]!);
    assert.equal(verifySignature({ ...own, sig: OTHER.sig }), false);
  });

  it('checks the id in full where nostr-wasm alone would not (empty or upper-case id)', () => {
    assert.equal(verifySignature({ ...fresh(VALID), id: '' }), false);
    assert.equal(verifySignature({ ...fresh(VALID), id: VALID.id.toUpperCase() }), false);
  });

  it('verifies events too large for the WebAssembly heap (nostr-tools does those)', () => {
    const large = signed({ content: 'x'.repeat(600_000) });
    assert.equal(verifySignature(large), true);
    assert.equal(verifySignature({ ...large, sig: flipLast(large.sig) }), false);
    assert.equal(verifySignature({ ...large, content: `${large.content}y` }), false);
    assert.equal(verifySignature(VALID), true, 'small events still verify after');
  });

  it('returns false without throwing on malformed ids, signatures and pubkeys', () => {
    const hexChar = fc.constantFrom(...'0123456789abcdefABCDEF');
    const anyString = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 140 }),
      fc.string({ unit: hexChar, maxLength: 140 }),
      fc.string({ unit: hexChar, minLength: 63, maxLength: 65 }),
      fc.string({ unit: hexChar, minLength: 127, maxLength: 129 }),
      fc.constantFrom('', ' ', '0x' + '0'.repeat(62), 'g'.repeat(64), 'z'.repeat(128)),
    );
    const malformed = fc.oneof(
      fc.record({ field: fc.constantFrom('id', 'pubkey', 'sig'), value: anyString }),
      fc.record({
        field: fc.constantFrom('id', 'pubkey', 'sig', 'content', 'kind', 'created_at', 'tags'),
        value: fc.oneof(
          fc.anything(),
          fc.constantFrom(NaN, Infinity, -Infinity, [[1]], [['a', null]]),
        ),
      }),
    );
    fc.assert(
      fc.property(malformed, ({ field, value }) => {
        const event = { ...fresh(VALID), [field]: value };
        let verdict: boolean | undefined;
        assert.doesNotThrow(() => {
          verdict = verifySignature(event);
        });
        if (!isDeepStrictEqual(value, VALID[field as keyof Event])) {
          assert.equal(verdict, false, `${field}: ${inspect(value)}`);
        }
        // An oversized signature must not have overwritten the verifier's state.
        assert.equal(verifySignature(VALID), true);
      }),
      propertyParams(500),
    );
  });

  it('returns false on inputs that are not events at all', () => {
    for (const value of [null, undefined, 0, 'event', [], [VALID], {}, { id: VALID.id }]) {
      assert.equal(verifySignature(value as unknown as Event), false);
    }
  });

  it('agrees with nostr-tools on generated valid and invalid events', () => {
    const number = fc.oneof(
      fc.integer({ min: 0, max: 2 ** 40 }),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
    );
    const template = fc.record({
      kind: fc.oneof(fc.integer({ min: 0, max: 65535 }), number),
      created_at: number,
      tags: fc.array(fc.array(fc.string({ unit: 'binary', maxLength: 12 }), { maxLength: 3 }), {
        maxLength: 3,
      }),
      content: fc.string({ unit: 'binary', maxLength: 200 }),
    });
    const tamper = fc.constantFrom(
      'none',
      'none',
      'none',
      ...Object.keys(SINGLE_FIELD_TAMPERS),
      'sig upper-case',
      'id upper-case',
      'sig s >= n',
      'pubkey random',
      'pubkey of signer 2',
    );
    let valid = 0;
    fc.assert(
      fc.property(template, fc.nat(KEYS.length - 1), tamper, (fields, k, how) => {
        const event = fresh(finalizeEvent({ ...fields }, KEYS[k]!));
        const changed = tampered(event, how);
        const wasm = verifySignature(fresh(changed));
        const tools = verifyEvent(fresh(changed));
        assert.equal(wasm, tools, `${how}: ${JSON.stringify(changed)}`);
        if (how === 'none') assert.equal(wasm, true);
        if (wasm) valid++;
      }),
      propertyParams(300),
    );
    assert.ok(valid > 50, `only ${valid} generated events were valid`);
  });
});

function tampered(event: Event, how: string): Event {
  switch (how) {
    case 'none':
      return event;
    case 'sig upper-case':
      return { ...event, sig: event.sig.toUpperCase() };
    case 'id upper-case':
      return { ...event, id: event.id.toUpperCase() };
    case 'sig s >= n':
      return { ...event, sig: event.sig.slice(0, 64) + 'f'.repeat(64) };
    case 'pubkey random':
      return { ...event, pubkey: Buffer.from(generateSecretKey()).toString('hex') };
    case 'pubkey of signer 2':
      return { ...event, pubkey: getPublicKey(KEYS[2]!) };
    default:
      return SINGLE_FIELD_TAMPERS[how]!(event);
  }
}
