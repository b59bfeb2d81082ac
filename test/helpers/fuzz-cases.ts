/**
 * fast-check generators of whole raw-socket exchanges for the fuzz run: HTTP requests as
 * bytes (methods, targets, duplicated and conflicting headers, bodies framed right and
 * wrong, pipelined, truncated, trickled) and WebSocket sessions (a proper upgrade, then
 * frames valid and not: masking, control frames, fragments, binary, lying lengths).
 */
import fc from 'fast-check';
import { encodeWsFrame, upgradeRequest } from './fuzz-socket.js';
import type { ExchangePlan, WsFrameSpec } from './fuzz-socket.js';
import { SIGNED_EVENTS, anyFrame, eventFrame, rawJson } from './frame-arbitraries.js';
import { anyTarget, plainPathOf, spellingOf } from './target-arbitraries.js';

/** One exchange to run, and what it carries (for the totals and for failure reports). */
export interface FuzzCase {
  kind: 'http' | 'ws';
  /** A short description: enough to see what was sent. */
  label: string;
  chunks: Buffer[];
  gapsMs: number[];
  fin: ExchangePlan['fin'];
  session?: NonNullable<ExchangePlan['afterUpgrade']>;
  /** HTTP requests or WebSocket frames sent. */
  units: number;
}

const weighted = <T>(...entries: [number, fc.Arbitrary<T>][]): fc.Arbitrary<T> =>
  fc.oneof(...entries.map(([weight, arbitrary]) => ({ weight, arbitrary })));

const ordinaryMethod = fc.constantFrom(
  'GET',
  'GET',
  'POST',
  'POST',
  'PUT',
  'DELETE',
  'HEAD',
  'OPTIONS',
  'PATCH',
);
const hostileMethod = weighted(
  [2, fc.constantFrom('TRACE', 'CONNECT', 'PRI', 'get', 'M-SEARCH', 'PROPFIND', '', 'G ET')],
  [1, fc.string({ unit: 'binary-ascii', maxLength: 12 })],
);

const interestingPaths = ['/events', '/admin/drain', '/admin/spike', '/stats', '/metrics', '/'];

/** Percent-encode what a request line cannot carry raw (HTTP parsers refuse it). */
function asciiOnly(target: string): string {
  return target.replace(/[^\x21-\x7e]/gu, (ch) =>
    [...Buffer.from(ch)].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join(''),
  );
}

/** Targets the HTTP parser takes: plain, or spelled with encodings, dots and slashes. */
const ordinaryTarget = weighted(
  [
    3,
    fc.constantFrom(
      '/',
      '/events',
      '/events',
      `/events?authors=${'a'.repeat(64)}&limit=2`,
      '/events?kinds=1&limit=3',
      '/healthz',
      '/nope',
      '/stats',
      '/admin/drain',
      '/%61dmin/drain',
      '//admin/drain',
      '/./admin/../admin/drain',
      'http://x/events',
      'http://x/admin/drain',
      'HTTP://x:1/%65vents',
      'http://x',
      'https://[::1]/events',
      '/events#frag',
      '/\\admin',
      '/%2e%2e/%2e%2e/etc/passwd',
    ),
  ],
  [
    3,
    spellingOf(
      fc
        .constantFrom(...interestingPaths)
        .map((p) => plainPathOf(p.split('/').filter(Boolean), false)),
    ).map((s) => asciiOnly(s.target)),
  ],
);

const hostileTarget = weighted(
  [1, fc.constantFrom('*', 'x:443', '/%00', '/%zz', '/a b', `/${'a'.repeat(9000)}`, '')],
  [2, anyTarget],
);

const hostileVersion = fc.constantFrom(
  'HTTP/2.0',
  'HTTP/0.9',
  'HTTP/1.1 x',
  'http/1.1',
  'HTTP/1.10',
  '',
  'HTTP/1.1\0',
);

const TOKEN = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~"];

/** Headers a well-behaved client may send. */
const ordinaryHeader = fc.constantFrom(
  'Connection: keep-alive',
  'Connection: close',
  'Keep-Alive: timeout=5, max=1000',
  'Content-Type: application/json',
  'Content-Type: text/plain; charset=utf-8',
  'Accept: application/nostr+json',
  'Accept: */*',
  'Accept-Encoding: gzip, br',
  'User-Agent: fuzz/1.0',
  'x-api-key: some-key',
  'Authorization: Bearer abc',
  'Origin: http://example.invalid',
  'Range: bytes=0-1',
  'Cookie: a=b',
);

/** Headers that are hop-by-hop, refused by the upstream library, conflicting or malformed. */
const hostileHeader = weighted(
  [
    10,
    fc.constantFrom(
      'Connection: Upgrade',
      'Connection: keep-alive, Upgrade, x-foo',
      'Connection: x-api-key, authorization',
      'Keep-Alive: 1',
      'Upgrade: websocket',
      'Upgrade: h2c',
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Key: short',
      'Sec-WebSocket-Version: 13',
      'Sec-WebSocket-Version: 8',
      'Expect: 100-continue',
      'Expect: nonsense',
      'Transfer-Encoding: chunked',
      'Transfer-Encoding: chunked, chunked',
      'Transfer-Encoding: gzip, chunked',
      'Transfer-Encoding: identity',
      'Transfer-Encoding: xchunked',
      'Transfer-Encoding:\tchunked',
      'Content-Length: 0',
      'Content-Length: -1',
      'Content-Length: 1, 2',
      'Content-Length: 99999999999999999999',
      'Content-Length: 0x10',
      'Content-Length:  5',
      'X-Forwarded-For: 1.2.3.4',
      'X-Forwarded-For: not-an-ip, ::1',
      'Forwarded: for=1.2.3.4',
      'X-Forwarded-Proto: https',
      'TE: trailers',
      'Trailer: x',
      'Proxy-Connection: keep-alive',
      'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA',
      'X-Folded: a\r\n b',
      ' Leading-Space: x',
      'No-Colon',
      ': empty-name',
      'Bad Name: x',
      'X-Nul: a\0b',
      'X-High: \xff\xfe',
      'X-Del: \x7f',
    ),
  ],
  [
    3,
    fc
      .tuple(
        fc.string({ unit: fc.constantFrom(...TOKEN), minLength: 1, maxLength: 20 }),
        fc.string({ unit: 'binary-ascii', maxLength: 40 }),
      )
      .map(([name, value]) => `${name}: ${value}`),
  ],
  [1, fc.nat(20_000).map((n) => `X-Long: ${'v'.repeat(n)}`)],
);

const body: fc.Arbitrary<Buffer> = weighted(
  [4, fc.constant(Buffer.alloc(0))],
  [4, fc.constantFrom(...SIGNED_EVENTS).map((e) => Buffer.from(JSON.stringify(e)))],
  [3, anyFrame.map((f) => Buffer.from(f.text))],
  [2, fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a))],
  [1, fc.nat(100_000).map((n) => Buffer.alloc(n, 0x78))],
);

/** How a body is framed: right, or wrong in the ways request smuggling uses. */
type Framing =
  | 'length'
  | 'chunked'
  | 'no-length'
  | 'short-length'
  | 'long-length'
  | 'bad-chunked'
  | 'length-and-chunked'
  | 'two-lengths'
  | 'same-two-lengths';
const HOSTILE_FRAMINGS: Framing[] = [
  'no-length',
  'short-length',
  'long-length',
  'bad-chunked',
  'length-and-chunked',
  'two-lengths',
  'same-two-lengths',
];

function chunked(data: Buffer, pieces: number): Buffer {
  const parts: Buffer[] = [];
  const size = Math.max(1, Math.ceil(data.length / Math.max(1, pieces)));
  for (let at = 0; at < data.length; at += size) {
    const piece = data.subarray(at, at + size);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from('0\r\n\r\n'));
  return Buffer.concat(parts);
}

const BAD_CHUNKS = [
  'zz\r\nabc\r\n0\r\n\r\n',
  'fffffffffffffffff\r\nabc\r\n',
  '3\r\nabcdef\r\n0\r\n\r\n',
  '3;ext=1\r\nabc\r\n0\r\n\r\n',
  '3\nabc\n0\n\n',
  '-1\r\n\r\n',
  '0\r\nTrailer: x\r\n\r\n',
  '3\r\nab',
];

/** What is wrong with one request: one thing at a time reaches past the HTTP parser. */
const FLAWS = [
  ...Array<'none'>(7).fill('none'),
  ...Array<'target'>(4).fill('target'),
  ...Array<'header'>(4).fill('header'),
  'framing',
  'framing',
  'method',
  'version',
  'host',
  'eol',
  'many-headers',
  'upgrade',
  'upgrade',
  'several',
] as const;
type Flaw = (typeof FLAWS)[number];

const request = fc
  .record({
    flaw: fc.constantFrom(...FLAWS),
    several: fc.uniqueArray(
      fc.constantFrom<Flaw>('target', 'header', 'framing', 'method', 'version', 'host', 'eol'),
      { minLength: 2, maxLength: 4 },
    ),
    method: fc.tuple(ordinaryMethod, hostileMethod),
    target: fc.tuple(ordinaryTarget, hostileTarget),
    version: fc.tuple(
      fc.constantFrom('HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0'),
      hostileVersion,
    ),
    host: fc.tuple(
      fc.constant('Host: gateway'),
      fc.constantFrom('', 'Host:', 'Host: a\r\nHost: b', 'Host: a b'),
    ),
    ordinary: fc.array(ordinaryHeader, { maxLength: 5 }),
    hostile: fc.array(hostileHeader, { minLength: 1, maxLength: 3 }),
    upgrade: fc.subarray([
      'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==',
      'Sec-WebSocket-Version: 13',
      'Upgrade: websocket',
    ]),
    body,
    framing: fc.tuple(
      fc.constantFrom<Framing>('length', 'length', 'length', 'chunked'),
      fc.constantFrom(...HOSTILE_FRAMINGS),
    ),
    badChunk: fc.constantFrom(...BAD_CHUNKS),
    pieces: fc.integer({ min: 1, max: 4 }),
    skew: fc.integer({ min: 1, max: 40 }),
    eol: fc.tuple(fc.constant('\r\n'), fc.constantFrom('\n', '\r', '\r\r\n')),
  })
  .map((r) => {
    const flawed = new Set<Flaw>(r.flaw === 'several' ? r.several : [r.flaw]);
    const pick = <T>(flaw: Flaw, [ordinary, hostile]: [T, T]): T =>
      flawed.has(flaw) ? hostile : ordinary;
    const method = pick('method', r.method);
    const target = pick('target', r.target);
    const version = pick('version', r.version);
    const eol = pick('eol', r.eol);
    const framing = pick('framing', r.framing);
    const headers = [
      pick('host', r.host),
      ...r.ordinary,
      ...(flawed.has('header') ? r.hostile : []),
    ].filter(Boolean);
    // An upgrade request, maybe incomplete, to whatever target: the WebSocket path's input.
    if (flawed.has('upgrade')) headers.push('Connection: Upgrade', ...r.upgrade);
    if (flawed.has('many-headers')) for (let i = 0; i < 200; i++) headers.push(`X-Many-${i}: ${i}`);
    let payload = r.body;
    switch (framing) {
      case 'length':
        headers.push(`Content-Length: ${payload.length}`);
        break;
      case 'short-length':
        headers.push(`Content-Length: ${Math.max(0, payload.length - r.skew)}`);
        break;
      case 'long-length':
        headers.push(`Content-Length: ${payload.length + r.skew}`);
        break;
      case 'chunked':
        headers.push('Transfer-Encoding: chunked');
        payload = chunked(payload, r.pieces);
        break;
      case 'bad-chunked':
        headers.push('Transfer-Encoding: chunked');
        payload = Buffer.from(r.badChunk);
        break;
      case 'length-and-chunked':
        headers.push(`Content-Length: ${payload.length}`, 'Transfer-Encoding: chunked');
        break;
      case 'two-lengths':
        headers.push(
          `Content-Length: ${payload.length}`,
          `Content-Length: ${payload.length + r.skew}`,
        );
        break;
      case 'same-two-lengths':
        headers.push(`Content-Length: ${payload.length}`, `Content-Length: ${payload.length}`);
        break;
      case 'no-length':
        break;
    }
    const head = `${method} ${target} ${version}${eol}${headers.map((h) => h + eol).join('')}${eol}`;
    const label = `${method} ${JSON.stringify(target.slice(0, 80))} ${version} [flaw ${[...flawed].join('+')}, ${framing}, ${payload.length} B, ${headers.length} headers]`;
    return { bytes: Buffer.concat([Buffer.from(head, 'latin1'), payload]), label };
  });

/** Cut `data` at the given fractions of its length (a trickled request). */
function split(data: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => Math.floor(c * data.length)))]
    .filter((p) => p > 0 && p < data.length)
    .sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    pieces.push(data.subarray(from, p));
    from = p;
  }
  pieces.push(data.subarray(from));
  return pieces;
}

const fraction = fc.double({ min: 0, max: 1, noNaN: true });

export const httpCase: fc.Arbitrary<FuzzCase> = fc
  .record({
    // Pipelined: one broken request ends its connection, so most exchanges carry one.
    requests: weighted(
      [7, fc.array(request, { minLength: 1, maxLength: 1 })],
      [3, fc.array(request, { minLength: 2, maxLength: 3 })],
    ),
    garbage: weighted([9, fc.constant(null)], [1, fc.uint8Array({ minLength: 1, maxLength: 64 })]),
    truncateAt: weighted([9, fc.constant(null)], [1, fraction]),
    cuts: fc.array(fraction, { maxLength: 3 }),
    gaps: fc.array(fc.nat(40), { minLength: 4, maxLength: 4 }),
    fin: weighted<ExchangePlan['fin']>(
      // FIN straight after the request: Node drops a request still in flight when its
      // client half-closes, so this tests the close, not the answer.
      [2, fc.constant('now')],
      [12, fc.constant('after-answer')],
      [3, fc.constant('never')],
    ),
  })
  .map((c): FuzzCase => {
    let bytes = Buffer.concat([
      c.garbage ? Buffer.from(c.garbage) : Buffer.alloc(0),
      ...c.requests.map((r) => r.bytes),
    ]);
    if (c.truncateAt !== null) bytes = bytes.subarray(0, Math.floor(c.truncateAt * bytes.length));
    const chunks = split(bytes, c.cuts);
    const flags = [c.garbage ? 'garbage first' : '', c.truncateAt !== null ? 'truncated' : '']
      .filter(Boolean)
      .join(', ');
    return {
      kind: 'http',
      label: `${c.requests.map((r) => r.label).join(' | ')}${flags ? ` (${flags})` : ''}, fin ${c.fin}, ${chunks.length} writes`,
      chunks,
      gapsMs: chunks.map((_, i) => (i === 0 ? 0 : c.gaps[i % c.gaps.length]!)),
      fin: c.fin,
      units: c.requests.length,
    };
  });

const text = (payload: Buffer | string, over: Partial<WsFrameSpec> = {}): WsFrameSpec => ({
  fin: true,
  rsv: 0,
  opcode: 1,
  masked: true,
  payload: Buffer.isBuffer(payload) ? payload : Buffer.from(payload),
  ...over,
});

const nostrText = weighted(
  [3, eventFrame.map((f) => f.text)],
  [3, anyFrame.map((f) => f.text)],
  [1, rawJson],
  [1, fc.constantFrom('["REQ","s",{"limit":1}]', '["CLOSE","s"]', '["COUNT","c",{}]')],
);

/** One logical WebSocket step: one frame, or several for a fragmented message. */
const wsStep: fc.Arbitrary<{ frames: WsFrameSpec[]; what: string; truncates?: boolean }> = weighted(
  [10, nostrText.map((t) => ({ frames: [text(t)], what: 'text' }))],
  [
    1,
    fc.integer({ min: 17_000, max: 100_000 }).map((n) => ({
      frames: [text(`["EVENT",{"id":"${'a'.repeat(64)}","content":"${'x'.repeat(n)}"}]`)],
      what: 'oversized text',
    })),
  ],
  [
    1,
    fc.uint8Array({ minLength: 1, maxLength: 40 }).map((a) => ({
      frames: [text(Buffer.concat([Buffer.from('["'), Buffer.from(a), Buffer.from([0xff, 0xfe])]))],
      what: 'bad utf-8',
    })),
  ],
  [
    1,
    fc
      .uint8Array({ maxLength: 200 })
      .map((a) => ({ frames: [text(Buffer.from(a), { opcode: 2 })], what: 'binary' })),
  ],
  [1, nostrText.map((t) => ({ frames: [text(t, { masked: false })], what: 'unmasked' }))],
  [
    2,
    fc.tuple(fc.constantFrom(9, 10), fc.uint8Array({ maxLength: 140 })).map(([opcode, a]) => ({
      frames: [text(Buffer.from(a), { opcode })],
      what: opcode === 9 ? 'ping' : 'pong',
    })),
  ],
  [
    1,
    fc
      .tuple(
        fc.constantFrom(1000, 1001, 999, 1005, 1006, 1015, 2999, 3000, 4999, 5000, 65535),
        fc.string({ maxLength: 20 }),
      )
      .map(([code, reason]) => {
        const payload = Buffer.alloc(2);
        payload.writeUInt16BE(code);
        return {
          frames: [text(Buffer.concat([payload, Buffer.from(reason)]), { opcode: 8 })],
          what: `close ${code}`,
        };
      }),
  ],
  [1, fc.constant({ frames: [text(Buffer.from([3]), { opcode: 8 })], what: 'close of one byte' })],
  [
    3,
    fc
      .tuple(nostrText, fc.integer({ min: 2, max: 5 }), fc.boolean(), fc.boolean())
      .map(([t, parts, pingInside, unfinished]) => {
        const data = Buffer.from(t);
        const size = Math.max(1, Math.ceil(data.length / parts));
        const frames: WsFrameSpec[] = [];
        for (let at = 0, i = 0; at < data.length || i === 0; at += size, i++) {
          frames.push(text(data.subarray(at, at + size), { opcode: i === 0 ? 1 : 0, fin: false }));
          if (pingInside && i === 0) frames.push(text('p', { opcode: 9 }));
        }
        if (!unfinished) frames[frames.length - 1]!.fin = true;
        return { frames, what: `fragmented${unfinished ? ', unfinished' : ''}` };
      }),
  ],
  [1, nostrText.map((t) => ({ frames: [text(t, { opcode: 0 })], what: 'continuation alone' }))],
  [
    1,
    fc
      .tuple(fc.integer({ min: 1, max: 7 }), nostrText)
      .map(([rsv, t]) => ({ frames: [text(t, { rsv })], what: `rsv ${rsv}` })),
  ],
  [
    1,
    fc
      .constantFrom(3, 4, 5, 6, 7, 11, 12, 13, 14, 15)
      .map((opcode) => ({ frames: [text('x', { opcode })], what: `opcode ${opcode}` })),
  ],
  [
    1,
    fc.constantFrom(9, 10, 8).map((opcode) => ({
      frames: [text('x', { opcode, fin: false })],
      what: 'fragmented control',
    })),
  ],
  [
    2,
    fc
      .constantFrom(2n ** 62n, 2n ** 63n + 5n, 10n * 1024n * 1024n, 65_535n, 1_000n)
      .map((declaredLength) => ({
        frames: [text('["EVENT",{', { declaredLength })],
        what: `declared length ${declaredLength}`,
        truncates: true,
      })),
  ],
);

export const wsCase: fc.Arbitrary<FuzzCase> = fc
  .record({
    path: fc.constantFrom('/', '/', '/', '/?x=1'),
    steps: fc.array(wsStep, { minLength: 1, maxLength: 12 }),
    gaps: fc.array(fc.nat(20), { minLength: 3, maxLength: 3 }),
    close: fc.boolean(),
  })
  .map((c): FuzzCase => {
    const specs = c.steps.flatMap((s) => s.frames);
    const frames = specs.map(encodeWsFrame);
    const truncates = c.steps.some((s) => s.truncates);
    const closeFrame = c.close
      ? encodeWsFrame({
          fin: true,
          rsv: 0,
          opcode: 8,
          masked: true,
          payload: Buffer.from([0x03, 0xe8]),
        })
      : undefined;
    return {
      kind: 'ws',
      label: `ws ${c.path}: ${c.steps.map((s) => s.what).join(', ')}${closeFrame ? ', close' : ''}${truncates ? ' (truncated frame)' : ''}`,
      chunks: [upgradeRequest(c.path)],
      gapsMs: [0],
      // The client ends a session with FIN after its frames (see runExchange).
      fin: 'never',
      session: { frames, gapsMs: frames.map((_, i) => c.gaps[i % c.gaps.length]!), closeFrame },
      units: frames.length,
    };
  });

/** The fuzz run's mix: mostly HTTP exchanges, a good share of WebSocket sessions. */
export const fuzzCase: fc.Arbitrary<FuzzCase> = weighted([3, httpCase], [1, wsCase]);
