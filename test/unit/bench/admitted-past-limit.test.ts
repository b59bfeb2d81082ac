import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  admittedPastLimit,
  pastLimitFailures,
} from '../../../src/bench/run/admitted-past-limit.js';

describe('admitted past a limit (nostr-at-limit)', { timeout: 10_000 }, () => {
  it('passes a run that stored every author up to its limit and no further', () => {
    const a = admittedPastLimit([10, 10, 0, 7], 10, 1000);
    assert.deepEqual(a, {
      authorLimit: 10,
      authors: 3,
      authorsAtLimit: 2,
      maxStored: 10,
      authorsOverAdmitted: 0,
      senderLimit: 1000,
      senderStored: 27,
      senderOverAdmitted: 0,
    });
    assert.deepEqual(pastLimitFailures(a), []);
  });

  it('fails a run that stored one event past an author limit, or past the sender limit', () => {
    const author = admittedPastLimit([10, 11, 3], 10, 1000);
    assert.equal(author.authorsOverAdmitted, 1);
    assert.equal(author.maxStored, 11);
    assert.match(
      pastLimitFailures(author).join(),
      /1 events stored past their author's limit of 10/,
    );
    const sender = admittedPastLimit([10, 10, 10], 10, 25);
    assert.equal(sender.senderOverAdmitted, 5);
    assert.match(pastLimitFailures(sender).join(), /5 events stored past the sender's limit of 25/);
  });

  it('fails a run that brought no author to its limit: it shows nothing', () => {
    const a = admittedPastLimit([3, 9, 0], 10, 1000);
    assert.equal(a.authorsAtLimit, 0);
    assert.match(pastLimitFailures(a).join(), /no author reached its limit of 10/);
  });
});
