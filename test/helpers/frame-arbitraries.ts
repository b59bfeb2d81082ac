/**
 * fast-check generators of Nostr client frames (as the text a WebSocket carries), each with
 * what a correct parser must call it, for property tests and the raw-socket fuzz alike.
 */
import fc from 'fast-check';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import type { Event } from 'nostr-tools/pure';

/** A generated frame and the classification it must get ('ANY': only "never throws"). */
export type FrameCase =
  | { kind: 'EVENT'; text: string; event: Event; signed: boolean }
  | { kind: 'REQ' | 'COUNT'; text: string; subId: string }
  | { kind: 'CLOSE' | 'AUTH'; text: string }
  | { kind: 'OTHER'; text: string; verb: string }
  | { kind: 'BAD_EVENT'; text: string }
  | { kind: 'MALFORMED'; text: string }
  | { kind: 'ANY'; text: string };

const KNOWN_VERBS = new Set(['EVENT', 'REQ', 'COUNT', 'CLOSE', 'AUTH']);

/** Signing is dear (about a millisecond): a small pool is signed once and reused. */
function signedPool(keys: number, perKey: number): Event[] {
  const pool: Event[] = [];
  for (let k = 0; k < keys; k++) {
    const sk = generateSecretKey();
    for (let n = 0; n < perKey; n++) {
      pool.push(
        finalizeEvent(
          {
            kind: [1, 7, 30023][n % 3]!,
            created_at: 1_700_000_000 + n,
            tags: n % 2 ? [['t', `tag${n}`]] : [],
            content: `note ${k}/${n} ✓ "quoted" \\ {"id":"${'f'.repeat(64)}"}`,
          },
          sk,
        ),
      );
    }
  }
  return pool;
}

export const SIGNED_EVENTS: readonly Event[] = signedPool(4, 6);

const HEX = '0123456789abcdef'.split('');
export const hex64 = fc.string({ unit: fc.constantFrom(...HEX), minLength: 64, maxLength: 64 });

/** Strings that are not a usable lowercase 64-hex id. */
const badId = fc.oneof(
  hex64.map((h) => h.toUpperCase().replace(/^[0-9]/, 'A')),
  fc.string({ unit: fc.constantFrom(...HEX), minLength: 0, maxLength: 63 }),
  fc.string({ unit: fc.constantFrom(...HEX), minLength: 65, maxLength: 80 }),
  hex64.map((h) => `${h.slice(0, 63)}g`),
  fc.string({ unit: 'binary', maxLength: 70 }).filter((s) => !/^[0-9a-f]{64}$/.test(s)),
);

/** Tokens JSON.stringify never writes: out-of-range numbers, escapes, prototype keys. */
const rawScalar = fc.oneof(
  fc.constantFrom(
    '1e400',
    '-1e400',
    '123456789012345678901234567890123456789',
    '-0',
    '1e-400',
    '0.1',
    'true',
    'false',
    'null',
    '"__proto__"',
    '"constructor"',
    '"\\u0000"',
    '"\\ud800"',
    '"EVENT"',
    '""',
  ),
  fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.stringify(v)),
  hex64.map((h) => `"${h}"`),
);

const rawKey = fc.oneof(
  fc.constantFrom(
    '__proto__',
    'constructor',
    'prototype',
    'toString',
    'id',
    'pubkey',
    'sig',
    'kind',
    'tags',
    'content',
    'created_at',
  ),
  fc.string({ maxLength: 8 }),
);

/** JSON-ish text built token by token, so it can hold what JSON.stringify would not write. */
export const rawJson: fc.Arbitrary<string> = fc.letrec<{
  value: string;
  array: string;
  object: string;
}>((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, rawScalar, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 5 }).map((items) => `[${items.join(',')}]`),
  object: fc
    .array(fc.tuple(rawKey, tie('value')), { maxLength: 6 })
    .map((entries) => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',')}}`),
})).value;

const verb = fc.oneof(
  fc.constantFrom(
    'EVENT',
    'REQ',
    'COUNT',
    'CLOSE',
    'AUTH',
    'NOTICE',
    'OK',
    'event',
    '__proto__',
    'constructor',
    '',
  ),
  fc.string({ unit: 'binary', maxLength: 10 }),
);

/** `[verb, ...raw values]`: any classification, never a throw. */
const jsonishFrame = fc
  .tuple(verb, fc.array(rawJson, { maxLength: 4 }))
  .map(([v, rest]): FrameCase => ({
    kind: 'ANY',
    text: `[${[JSON.stringify(v), ...rest].join(',')}]`,
  }));

function eventWith(event: Event, changes: Record<string, unknown>): Record<string, unknown> {
  return { ...event, ...changes };
}

/** Well-formed EVENT frames: signed as is, or with their id or signature broken. */
export const eventFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.constantFrom(...SIGNED_EVENTS),
    fc.constantFrom(...SIGNED_EVENTS),
    fc.constantFrom('as-is', 'other-sig', 'changed-content', 'extra-key', 'reversed-keys'),
    fc.constantFrom(0, 2),
    fc.array(rawJson, { maxLength: 2 }),
  )
  .map(([event, other, variant, indent, trailing]): FrameCase => {
    let body: Record<string, unknown> = { ...event };
    let signed = true;
    if (variant === 'other-sig' && other.id !== event.id) {
      body = eventWith(event, { sig: other.sig });
      signed = false;
    } else if (variant === 'changed-content') {
      body = eventWith(event, { content: `${event.content}!` });
      signed = false;
    } else if (variant === 'extra-key') {
      body = eventWith(event, { extra: { id: other.id } });
    } else if (variant === 'reversed-keys') {
      body = Object.fromEntries(Object.entries(event).reverse());
    }
    const head = JSON.stringify(['EVENT', body], null, indent);
    // Elements after the event are ignored by NIP-01 parsers: add them as raw text.
    const text = trailing.length ? `${head.slice(0, -1)},${trailing.join(',')}]` : head;
    return { kind: 'EVENT', text, event: body as unknown as Event, signed };
  });

/** EVENT frames whose event cannot be accepted: OK false "invalid:". */
const badEventFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.constantFrom(...SIGNED_EVENTS),
    fc.constantFrom('id', 'pubkey', 'sig', 'kind', 'content', 'created_at', 'tags'),
    fc.oneof(badId, fc.jsonValue({ maxDepth: 2 })),
    fc.constantFrom('replace', 'delete', 'not-object'),
  )
  .map(([event, field, value, how]): FrameCase => {
    if (how === 'not-object') {
      const notObject = Array.isArray(value) || value === null || typeof value !== 'object';
      return {
        kind: 'BAD_EVENT',
        text: JSON.stringify(['EVENT', notObject ? value : [value]]),
      };
    }
    const body: Record<string, unknown> = { ...event };
    if (how === 'delete') delete body[field];
    else body[field] = wrongFor(field, value);
    return { kind: 'BAD_EVENT', text: JSON.stringify(['EVENT', body]) };
  });

/** A value of the wrong type (or shape) for an event field. */
function wrongFor(field: string, value: unknown): unknown {
  switch (field) {
    case 'id':
    case 'pubkey':
      return typeof value === 'string' && !/^[0-9a-f]{64}$/.test(value) ? value : 42;
    case 'sig':
      return typeof value === 'string' ? 7 : value;
    case 'kind':
    case 'created_at':
      return typeof value === 'number' ? String(value) : value;
    case 'content':
      return typeof value === 'string' ? [value] : value;
    default:
      return Array.isArray(value) ? [[...(value as unknown[]), 1]] : 'not-tags';
  }
}

const subId = fc
  .string({ unit: 'binary', minLength: 1, maxLength: 64 })
  .filter((s) => s.length <= 64);

const reqFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.constantFrom('REQ' as const, 'COUNT' as const),
    subId,
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  )
  .map(([v, id, filters]) => ({ kind: v, text: JSON.stringify([v, id, ...filters]), subId: id }));

const badReqFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.constantFrom('REQ', 'COUNT'),
    fc.oneof(
      fc.constant(''),
      fc.string({ minLength: 65, maxLength: 100 }),
      fc.jsonValue({ maxDepth: 1 }).filter((v) => typeof v !== 'string'),
    ),
  )
  .map(([v, id]): FrameCase => ({ kind: 'MALFORMED', text: JSON.stringify([v, id, {}]) }));

const closeAuthFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.constantFrom('CLOSE' as const, 'AUTH' as const),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 2 }),
  )
  .map(([v, rest]) => ({ kind: v, text: JSON.stringify([v, ...rest]) }));

const otherFrame: fc.Arbitrary<FrameCase> = fc
  .tuple(
    fc.oneof(verb, fc.string({ unit: 'binary', maxLength: 20 })).filter((v) => !KNOWN_VERBS.has(v)),
    fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 2 }),
  )
  .map(([v, rest]) => ({ kind: 'OTHER', text: JSON.stringify([v, ...rest]), verb: v }));

const malformedFrame: fc.Arbitrary<FrameCase> = fc
  .oneof(
    fc.string({ unit: 'binary', maxLength: 100 }).filter((s) => !parsesAsJson(s)),
    fc
      .jsonValue({ maxDepth: 2 })
      .filter((v) => !Array.isArray(v))
      .map((v) => JSON.stringify(v)),
    fc.constant('[]'),
    fc
      .tuple(
        fc.jsonValue({ maxDepth: 1 }).filter((v) => typeof v !== 'string'),
        fc.jsonValue(),
      )
      .map((a) => JSON.stringify(a)),
  )
  .map((text): FrameCase => ({ kind: 'MALFORMED', text }));

function parsesAsJson(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

/** Every kind of frame, with its expected classification. */
export const classifiedFrame: fc.Arbitrary<FrameCase> = fc.oneof(
  eventFrame,
  badEventFrame,
  reqFrame,
  badReqFrame,
  closeAuthFrame,
  otherFrame,
  malformedFrame,
);

/** Anything at all a client could send as text, classified or not. */
export const anyFrame: fc.Arbitrary<FrameCase> = fc.oneof(
  { arbitrary: classifiedFrame, weight: 3 },
  { arbitrary: jsonishFrame, weight: 2 },
  {
    arbitrary: fc
      .string({ unit: 'binary', maxLength: 200 })
      .map((text): FrameCase => ({ kind: 'ANY', text })),
    weight: 1,
  },
);

/** Text around `"id":"<hex>"` fragments, for the id sniffer. */
export const sniffableText: fc.Arbitrary<string> = fc
  .array(
    fc.oneof(
      rawJson,
      fc.string({ unit: 'binary', maxLength: 20 }),
      fc
        .tuple(fc.constantFrom('', ' ', '\n\t'), fc.oneof(hex64, badId))
        .map(([ws, id]) => `"id"${ws}:${ws}"${id}"`),
      fc.constantFrom('\\"id\\":\\"', '"i\\u0064":"', '["EVENT",', '{', '"'),
    ),
    { maxLength: 8 },
  )
  .chain((parts) =>
    fc
      .constantFrom('', '["EVENT",', '  [ "EVENT" , ', '["REQ",')
      .map((head) => head + parts.join('')),
  );
