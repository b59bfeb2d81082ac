/**
 * A request body on its way to a relay: taken as it is when it declares a length within the
 * limit, bounded otherwise; read whole, it fails as an async iterator would.
 */
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { PassThrough, Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { BODY_TOO_LARGE, limitedBody, readWhole } from '../../../src/gateway/upstream-io.js';

/** A request body stand-in with these headers. */
function payload(headers: Record<string, string>): IncomingMessage {
  return Object.assign(new PassThrough(), { headers }) as unknown as IncomingMessage;
}

describe('limitedBody', () => {
  it('takes a body as it is when its declared length is within the limit', () => {
    const p = payload({ 'content-length': '10' });
    assert.equal(limitedBody(p, 10), p);
  });

  it('bounds a body without a declared length, or declaring more than the limit', async () => {
    const cases: Record<string, string>[] = [
      {},
      { 'content-length': '11' },
      { 'content-length': 'x' },
    ];
    for (const headers of cases) {
      const p = payload(headers);
      const body = limitedBody(p, 10);
      assert.notEqual(body, p, JSON.stringify(headers));
      (p as unknown as PassThrough).end(Buffer.alloc(11));
      await assert.rejects(readWhole(body), { code: BODY_TOO_LARGE });
    }
  });
});

describe('readWhole', () => {
  it('reads a stream to its end, in one buffer', async () => {
    assert.deepEqual(
      await readWhole(Readable.from([Buffer.from('ab'), Buffer.from('c')])),
      Buffer.from('abc'),
    );
    assert.deepEqual(await readWhole(Readable.from([Buffer.from('one')])), Buffer.from('one'));
    assert.deepEqual(await readWhole(Readable.from([])), Buffer.alloc(0));
  });

  it('fails with the error that ended the stream, before or while it is read', async () => {
    const failed = new PassThrough();
    failed.on('error', () => undefined);
    failed.destroy(Object.assign(new Error('gone'), { code: 'SLUICE_CLIENT_GONE' }));
    await assert.rejects(readWhole(failed), { code: 'SLUICE_CLIENT_GONE' });
    const failing = new PassThrough();
    const read = readWhole(failing);
    failing.write('partial');
    failing.destroy(new Error('cut'));
    await assert.rejects(read, { message: 'cut' });
  });

  it('fails as premature when the stream closes before its end', async () => {
    const cut = new PassThrough();
    const read = readWhole(cut);
    cut.write('partial');
    cut.destroy();
    await assert.rejects(read, { code: 'ERR_STREAM_PREMATURE_CLOSE' });
  });
});
