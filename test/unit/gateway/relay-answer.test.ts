import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { answerSaysDuplicate } from '../../../src/gateway/http-forward.js';

describe("a relay's answer to an HTTP event", { timeout: 10_000 }, () => {
  it('says duplicate in a JSON object message or a NIP-01 OK message, and nowhere else', () => {
    const says = (text: string) => answerSaysDuplicate(Buffer.from(text));
    assert.equal(
      says('{"id":"ab","accepted":true,"message":"duplicate: already have this event"}'),
      true,
    );
    assert.equal(says('["OK","ab",true,"duplicate: have it"]'), true);
    assert.equal(says('{"id":"ab","accepted":true}'), false);
    assert.equal(says('{"accepted":true,"message":"stored; duplicate: no"}'), false);
    assert.equal(says('["NOTICE","duplicate: x"]'), false);
    assert.equal(says('{"message":["duplicate:"]}'), false);
    assert.equal(says('duplicate: plain text'), false);
    assert.equal(says('null'), false);
    assert.equal(says(''), false);
  });
});
