import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { finalizeEvent, generateSecretKey } from 'nostr-tools/pure';
import { parseClientFrame, sniffEventId, verifySignature } from '../../../src/nostr/frames.js';
import { relayableCloseCode } from '../../../src/gateway/ws-connection.js';

const event = finalizeEvent(
  { kind: 1, created_at: 1_700_000_000, tags: [], content: 'hello' },
  generateSecretKey(),
);

describe('client frames', { timeout: 30_000 }, () => {
  it('parses a signed EVENT and verifies it apart', () => {
    const frame = parseClientFrame(JSON.stringify(['EVENT', event]));
    assert.equal(frame.type, 'EVENT');
    assert.equal(frame.type === 'EVENT' && verifySignature(frame.event), true);
  });

  it('parses a tampered EVENT, whose verification then fails', () => {
    const frame = parseClientFrame(JSON.stringify(['EVENT', { ...event, content: 'changed' }]));
    assert.equal(frame.type, 'EVENT');
    assert.equal(frame.type === 'EVENT' && verifySignature(frame.event), false);
  });

  it('rejects an EVENT with missing fields', () => {
    const frame = parseClientFrame(JSON.stringify(['EVENT', { id: event.id, kind: 'one' }]));
    assert.equal(frame.type, 'BAD_EVENT');
  });

  it('calls non-JSON and non-array frames malformed', () => {
    assert.equal(parseClientFrame('{not json').type, 'MALFORMED');
    assert.equal(parseClientFrame('{"a":1}').type, 'MALFORMED');
    assert.equal(parseClientFrame('[]').type, 'MALFORMED');
    assert.equal(parseClientFrame('["REQ"]').type, 'MALFORMED');
  });

  it('recognises REQ, CLOSE, AUTH and passes unknown verbs on', () => {
    assert.deepEqual(parseClientFrame('["REQ","s1",{}]'), { type: 'REQ', subId: 's1', filters: 1 });
    assert.equal(parseClientFrame('["CLOSE","s1"]').type, 'CLOSE');
    assert.equal(parseClientFrame('["AUTH",{}]').type, 'AUTH');
    assert.deepEqual(parseClientFrame('["NEG-OPEN","x"]'), {
      type: 'OTHER',
      verb: 'NEG-OPEN',
    });
  });

  it('sniffs the id of an EVENT too large to parse', () => {
    const huge = JSON.stringify([
      'EVENT',
      { content: `"id":"${'0'.repeat(64)}" ${'x'.repeat(50_000)}`, id: event.id },
    ]);
    assert.equal(
      sniffEventId(huge),
      event.id,
      'an id quoted inside content is escaped, so not taken',
    );
    assert.equal(sniffEventId('["REQ","x"]'), undefined);
  });

  it('never relays a reserved close code', () => {
    assert.equal(relayableCloseCode(1005), 1000);
    assert.equal(relayableCloseCode(1006), 1011);
    assert.equal(relayableCloseCode(1001), 1001);
    assert.equal(relayableCloseCode(4000), 4000);
    assert.equal(relayableCloseCode(999), 1011);
  });
});
