import type { GlideClient, GlideClusterClient } from '@valkey/valkey-glide';

/** The private parts of glide's BaseClient (2.5.x) that coalescing needs. */
interface GlideWriter {
  writeInProgress: boolean;
  writeOrBufferRequest(message: unknown, encode: (msg: unknown, writer: unknown) => void): void;
  writeBufferedRequestsToSocket(): void;
  requestWriter: unknown;
}

/**
 * Glide's Node client hands every command to its Rust core over a local socket, and writes at
 * once whenever no write is in flight: under load that is one socket write per command, ~10%
 * of the gateway's CPU in a profile. Here the first command of an event-loop turn schedules
 * one write (setImmediate: after this turn's I/O callbacks) and the commands issued until then
 * join it, as iovalkey's auto-pipelining does. Commands, order and answers are unchanged.
 * Returns false (and changes nothing) if glide's internals are not what this expects.
 */
export function coalesceGlideWrites(client: GlideClient | GlideClusterClient): boolean {
  const inner = client as unknown as GlideWriter;
  if (
    typeof inner.writeOrBufferRequest !== 'function' ||
    typeof inner.writeBufferedRequestsToSocket !== 'function' ||
    typeof inner.writeInProgress !== 'boolean' ||
    inner.requestWriter === undefined
  ) {
    return false;
  }
  inner.writeOrBufferRequest = (message, encode) => {
    encode(message, inner.requestWriter);
    if (inner.writeInProgress) return;
    inner.writeInProgress = true;
    setImmediate(() => inner.writeBufferedRequestsToSocket());
  };
  return true;
}
