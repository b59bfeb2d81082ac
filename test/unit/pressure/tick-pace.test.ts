import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TickPace, paceParams, shouldPublish } from '../../../src/pressure/feed/tick-pace.js';

const out = (u: number, uhat = u, mode = 'normal') => ({ u, uhat, mode });

describe('the feed’s sampling pace', { timeout: 10_000 }, () => {
  it('goes fast at 0.7 x target (u or its prediction), slow again only below 0.6', () => {
    const pace = new TickPace(paceParams(500, 50, 0.7));
    assert.equal(pace.update(out(0.5)), 500);
    assert.equal(pace.update(out(0.65, 0.72)), 50, 'the prediction crosses first on a rise');
    assert.equal(pace.update(out(0.65)), 50, 'between the thresholds: stays fast');
    assert.equal(pace.update(out(0.61)), 50);
    assert.equal(pace.update(out(0.59)), 500, 'below 0.6: slow');
    assert.equal(pace.update(out(0.69)), 500, 'between the thresholds: stays slow');
    assert.equal(pace.update(out(0.75, 0.6)), 50, 'a spike the filter has not caught up with');
    assert.equal(new TickPace(paceParams(500, 50, 0.7)).update(out(0.2, 0.2, 'emergency')), 50);
  });

  it('equal ticks turn it off; a fast tick slower than the tick is refused', () => {
    const off = new TickPace(paceParams(500, 500, 0.7));
    assert.equal(off.update(out(1.2)), 500);
    assert.throws(() => paceParams(500, 600, 0.7), /must be a positive integer <= the tick/);
    assert.throws(() => paceParams(500, 0, 0.7), RangeError);
  });

  it('publishes every slow tick, and under the fast one only changes and a heartbeat', () => {
    const at = (since: number | undefined, tickMs: number, changed = false) =>
      shouldPublish({ changed, sinceLastPublishMs: since, tickMs, slowMs: 500 });
    assert.equal(at(undefined, 50), true, 'the first report');
    assert.equal(at(480, 500), true, 'slow ticks a little early still publish');
    assert.equal(at(260, 500), true);
    assert.equal(at(50, 50), false, 'fast, nothing changed');
    assert.equal(at(440, 50), false);
    assert.equal(at(476, 50), true, 'the heartbeat, within half a fast tick of the slow one');
    assert.equal(at(50, 50, true), true, 'a change goes out at once');
  });
});
