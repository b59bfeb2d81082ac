/** What every proxy in front of the relays shares: its upstream pool, its body bound and blame. */
import type { IncomingMessage } from 'node:http';
import { Transform, finished } from 'node:stream';
import type { Readable } from 'node:stream';
import { Agent } from 'undici';

/** The upstream connection pool (undici) each proxy keeps per relay node. */
export const UPSTREAM_POOL = { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 };

/**
 * The gateway's one dispatcher to its relay nodes (a pool of UPSTREAM_POOL per node): proxied
 * requests and the gateway's own (NIP-11 fetches) share it, so neither opens connections
 * outside the node's pool.
 */
export function upstreamDispatcher(): Agent {
  return new Agent(UPSTREAM_POOL);
}

/**
 * A stream read to its end, in memory: only for bodies bounded before (see boundedBody, or a
 * declared Content-Length within the limit). Fails as an async iterator would: with the
 * stream's error, or ERR_STREAM_PREMATURE_CLOSE when it closes before its end.
 */
export function readWhole(stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    stream.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      length += chunk.length;
    });
    finished(stream, { writable: false }, (err) => {
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length));
    });
  });
}

/**
 * A request body as the proxy takes it: as it is when it declares a Content-Length within
 * `limit` (Node's parser reads no byte past a declared length), else through boundedBody.
 */
export function limitedBody(payload: IncomingMessage, limit: number): Readable {
  const declared = Number(payload.headers['content-length']);
  return declared <= limit ? payload : payload.pipe(boundedBody(limit));
}

/** Error codes the gateway gives to failures a client caused on the way to a relay. */
export const BODY_TOO_LARGE = 'SLUICE_BODY_TOO_LARGE';
export const CLIENT_GONE = 'SLUICE_CLIENT_GONE';

/** An error with one of the codes above: the client's doing, never the relay's. */
export function clientError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** Fail a streamed body that grows past the limit (for bodies without Content-Length). */
export function boundedBody(limit: number): Transform {
  let seen = 0;
  const body = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > limit) done(clientError(BODY_TOO_LARGE, `request body exceeds ${limit} bytes`));
      else done(null, chunk);
    },
  });
  // The body can fail while the request still waits for its admission, before anyone reads
  // it: that must not be an unhandled 'error' (a crash). Its reader sees `errored` later.
  body.on('error', () => {});
  return body;
}

/**
 * Who an error on the way to a relay is down to. Only `relay` proves the relay is unwell and
 * counts against its health; `client` is what a client sent or did (bad headers, a body over
 * the limit, going away); `unknown` is answered but counted against no one.
 */
export type Blame =
  | { party: 'relay'; timeout: boolean }
  | { party: 'client'; reason: 'body-too-large' | 'gone' | 'refused' }
  | { party: 'unknown' };

/** The relay did not answer: refused, reset, unreachable, or too slow to connect or answer. */
const RELAY_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EHOSTDOWN',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
const TIMEOUT_CODES = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);
/** The upstream library refused the request as the client made it (a header, a length). */
const REFUSED_CODES = new Set([
  'UND_ERR_INVALID_ARG',
  'UND_ERR_NOT_SUPPORTED',
  'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH',
]);
/** The client's side of the exchange ended early. */
const GONE_CODES = new Set([
  CLIENT_GONE,
  'UND_ERR_ABORTED',
  'ECONNABORTED',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

/**
 * Decided by error code, innermost cause first (proxy libraries wrap the error they got),
 * never by message: a message is free text that a client can sometimes influence.
 */
export function blameOf(error: unknown): Blame {
  const codes: string[] = [];
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') codes.unshift(code);
    e = (e as { cause?: unknown }).cause;
  }
  for (const code of codes) {
    if (code === BODY_TOO_LARGE) return { party: 'client', reason: 'body-too-large' };
    if (GONE_CODES.has(code)) return { party: 'client', reason: 'gone' };
    if (REFUSED_CODES.has(code)) return { party: 'client', reason: 'refused' };
    if (RELAY_CODES.has(code)) return { party: 'relay', timeout: TIMEOUT_CODES.has(code) };
  }
  return { party: 'unknown' };
}
