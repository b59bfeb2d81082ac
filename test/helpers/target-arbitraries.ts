/**
 * fast-check generators of request targets: a plain path and the many ways a client can
 * spell it (percent-encoding in either case, dot segments, extra and encoded slashes,
 * absolute form), which a router reads as the same path.
 */
import fc from 'fast-check';

/**
 * Characters that mean the same raw or percent-encoded inside a path segment. No space: a
 * request line cannot hold one raw, and URL parsers strip it at the end.
 */
const SEGMENT_CHARS = [
  ...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789',
  ...`-_~.!$&'()*+,;=:@`,
  '\u00a0',
  'é',
  'ß',
  '✓',
  '😀',
];

/** A path segment: never empty, never a dot segment. */
export const segment = fc
  .string({ unit: fc.constantFrom(...SEGMENT_CHARS), minLength: 1, maxLength: 8 })
  .filter((s) => s !== '.' && s !== '..');

export interface PlainPath {
  segments: string[];
  trailingSlash: boolean;
  /** The canonical spelling: "/" + segments, with the trailing slash if any. */
  path: string;
}

export function plainPathOf(segments: string[], trailingSlash: boolean): PlainPath {
  const slash = trailingSlash && segments.length > 0 ? '/' : '';
  return { segments, trailingSlash, path: `/${segments.join('/')}${slash}` };
}

export const plainPath: fc.Arbitrary<PlainPath> = fc
  .tuple(fc.array(segment, { maxLength: 6 }), fc.boolean())
  .map(([segments, trailing]) => plainPathOf(segments, trailing));

/** Percent-encode the UTF-8 bytes of one character, hex digits in the given case. */
function encodeChar(ch: string, upper: boolean): string {
  const hex = [...Buffer.from(ch, 'utf8')].map((b) => `%${b.toString(16).padStart(2, '0')}`);
  const encoded = hex.join('');
  return upper ? encoded.toUpperCase() : encoded;
}

/** How one character is written: as is, or encoded in upper or lower case. */
const charSpelling = fc.constantFrom('raw', 'upper', 'lower');

function spellSegment(seg: string, how: readonly string[]): string {
  return [...seg]
    .map((ch, i) => {
      const choice = how[i % Math.max(1, how.length)] ?? 'raw';
      return choice === 'raw' ? ch : encodeChar(ch, choice === 'upper');
    })
    .join('');
}

/** Separators between two segments that a router reads as one "/". */
const SEPARATORS = [
  '/',
  '//',
  '///',
  '/./',
  '/%2e/',
  '/%2E/',
  '/.%2f',
  '%2f',
  '%2F',
  '/x/../',
  '/x/%2e%2e/',
  '/x/.%2E/',
  '/x/%2E./',
  '%2fx%2f..%2f',
  '/x%2f..%2f',
  '/x/y/../../',
];

/** What may precede the first segment of an origin-form target. */
const ORIGIN_LEADS = ['/', '/./', '/../', '/%2e%2e/', '/x/../', '/%2e/', '/x/..%2f'];

/** In absolute form the authority is already given: a doubled leading slash is a path. */
const ABSOLUTE_LEADS = [...ORIGIN_LEADS, '//', '///'];

const ORIGINS = [
  'http://x',
  'HTTP://X',
  'https://gateway.invalid',
  'http://127.0.0.1:8080',
  'http://[::1]',
  'http://user:pw@host',
  'hTtPs://a.b.c:1',
];

const SUFFIXES = ['', '?', '?a=1', '?a/../b', '?x=%2e%2e', '#frag', '?q=1#f/../g'];

export interface Spelling {
  plain: PlainPath;
  target: string;
}

function spell(
  plain: PlainPath,
  origin: string,
  lead: string,
  seps: string[],
  how: string[][],
  suffix: string,
): string {
  const parts = plain.segments.map((s, i) => spellSegment(s, how[i] ?? []));
  let body = lead;
  parts.forEach((p, i) => {
    body += (i === 0 ? '' : (seps[i] ?? '/')) + p;
  });
  if (plain.trailingSlash && parts.length > 0) body += '/';
  return origin + body + suffix;
}

/** A plain path and one of its spellings, in origin or absolute form. */
export function spellingOf(plainArb: fc.Arbitrary<PlainPath> = plainPath): fc.Arbitrary<Spelling> {
  return plainArb.chain((plain) =>
    fc
      .record({
        absolute: fc.boolean(),
        origin: fc.constantFrom(...ORIGINS),
        originLead: fc.constantFrom(...ORIGIN_LEADS),
        absoluteLead: fc.constantFrom(...ABSOLUTE_LEADS),
        seps: fc.array(fc.constantFrom(...SEPARATORS), {
          minLength: plain.segments.length,
          maxLength: plain.segments.length,
        }),
        how: fc.array(fc.array(charSpelling, { maxLength: 8 }), {
          minLength: plain.segments.length,
          maxLength: plain.segments.length,
        }),
        suffix: fc.constantFrom(...SUFFIXES),
      })
      .map((r) => ({
        plain,
        target: spell(
          plain,
          r.absolute ? r.origin : '',
          r.absolute ? r.absoluteLead : r.originLead,
          r.seps,
          r.how,
          r.suffix,
        ),
      })),
  );
}

/** An origin-form target with a doubled leading slash: still a path (RFC 9112 origin-form). */
export const doubleSlashLead: fc.Arbitrary<Spelling> = plainPath
  .filter((p) => p.segments.length > 0)
  .map((plain) => ({ plain, target: `/${plain.path}` }));

/** Anything a request line could carry as its target, usable or not. */
export const anyTarget: fc.Arbitrary<string> = fc.oneof(
  spellingOf().map((s) => s.target),
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'binary', maxLength: 60 }).map((s) => `/${s}`),
  fc.string({ unit: 'binary-ascii', maxLength: 60 }).map((s) => `/${s}`),
  fc
    .tuple(
      fc.constantFrom('/', 'http://h/', '//', '*', 'h:80', 'ftp://h/', 'http:/x', ''),
      fc.string({ maxLength: 30 }),
    )
    .map(([a, b]) => a + b),
  fc
    .array(
      fc.constantFrom(
        '%',
        '%2',
        '%zz',
        '%00',
        '%2f',
        '%5c',
        '%25',
        '..',
        '.',
        '/',
        '\\',
        '?',
        '#',
        'a',
        '%c3',
        '%ff',
      ),
      {
        maxLength: 12,
      },
    )
    .map((parts) => `/${parts.join('')}`),
  fc.constant(`/${'a'.repeat(9000)}`),
);
