/** What every proxy in front of the relays shares: its upstream pool and its body bound. */
import { Transform } from 'node:stream';

/** The upstream connection pool (undici) each proxy keeps per relay node. */
export const UPSTREAM_POOL = { connections: 128, pipelining: 1, keepAliveTimeout: 30_000 };

/** Fail a streamed body that grows past the limit (for bodies without Content-Length). */
export function boundedBody(limit: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (seen > limit) done(new Error(`request body exceeds ${limit} bytes`));
      else done(null, chunk);
    },
  });
}
