/**
 * pressure.drain in process, on an injected clock: which nodes are in trouble, and the pace
 * at which their connections are moved (a bounded share per second, idle ones first, never
 * all at once).
 *
 * A property failure prints fast-check's seed; replay it with SLUICE_PROPERTY_SEED=<seed>.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  ConnectionDrainer,
  DRAIN_CLOSE_REASON,
  DrainPacer,
  troubledNodes,
} from '../../../src/gateway/ws-drain.js';
import type { Drainable } from '../../../src/gateway/ws-drain.js';
import { maxInAnySecond } from '../../helpers/rates.js';
import { propertyParams } from '../../helpers/property-params.js';

const SETTINGS = {
  enabled: true,
  belowShareOfBest: 0.5,
  sharePerSec: 0.05,
  minPerSec: 1,
  settleMs: 5000,
};

class FakeConnection implements Drainable {
  leftAt: number | undefined;
  constructor(
    readonly nodeId: string,
    readonly idle: boolean,
    private readonly clock: { t: number },
  ) {}
  get leaving(): boolean {
    return this.leftAt !== undefined;
  }
  leave(notice: string, reason: string): void {
    assert.match(notice, /reconnect/);
    assert.equal(reason, DRAIN_CLOSE_REASON);
    assert.ok(Buffer.byteLength(reason) <= 123, 'a close reason ws accepts');
    this.leftAt = this.clock.t;
  }
}

describe('drain: nodes in trouble', { timeout: 10_000 }, () => {
  const nodes = (healthy: boolean[]) => healthy.map((h, i) => ({ id: `n${i}`, healthy: h }));
  const headroom = (ms: number[]) => (id: string) => ms[Number(id.slice(1))]!;

  it('is a healthy node below half of the best healthy multiplier, or in emergency (headroom 0)', () => {
    assert.deepEqual(
      [...troubledNodes(nodes([true, true, true]), headroom([1, 0.55, 0.45]), 0.5)],
      ['n2'],
    );
    assert.deepEqual(
      [...troubledNodes(nodes([true, true, true]), headroom([0.6, 0, 0.3]), 0.5)],
      ['n1'],
      'relative to the best, not to 1',
    );
    assert.deepEqual(
      [...troubledNodes(nodes([false, true, true]), headroom([1, 0.4, 0.3]), 0.5)],
      [],
      'a node out of rotation is not the best, nor drained',
    );
    assert.deepEqual(
      [...troubledNodes(nodes([true, true]), headroom([0, 0]), 0.5)],
      [],
      'nowhere better to go: nobody moves',
    );
  });
});

describe('drain: pacing on an injected clock', { timeout: 30_000 }, () => {
  it('moves at most max(minPerSec, sharePerSec x open) in any second, spread over the second', () => {
    const clock = { t: 0 };
    const pacer = new DrainPacer(SETTINGS, () => clock.t);
    const times: number[] = [];
    let open = 200;
    const perTick: number[] = [];
    for (; clock.t < 20_000; clock.t += 250) {
      const n = pacer.allowance('n0', open);
      pacer.record('n0', n);
      perTick.push(n);
      for (let i = 0; i < n; i++) times.push(clock.t);
      open -= n;
    }
    assert.ok(
      maxInAnySecond(times) <= 10,
      `at most 5% of 200 per second (${maxInAnySecond(times)})`,
    );
    assert.ok(Math.max(...perTick) <= 3, 'a second allowance spread over its ticks');
    assert.ok(times.length >= 100, `and it keeps moving (${times.length} in 20 s)`);
    assert.ok(open > 0, 'never all at once: connections remain after 20 s at 5% a second');
  });

  it('over generated settings and irregular ticks: never more than the bound in any second, and progress', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2000 }),
        fc.double({ min: 0.01, max: 0.5, noNaN: true }),
        fc.integer({ min: 1, max: 20 }),
        fc.array(fc.integer({ min: 1, max: 900 }), { minLength: 20, maxLength: 200 }),
        (open, sharePerSec, minPerSec, gaps) => {
          const clock = { t: 0 };
          const pacer = new DrainPacer({ sharePerSec, minPerSec }, () => clock.t);
          const bound = Math.min(open, Math.max(minPerSec, Math.floor(sharePerSec * open)));
          const times: number[] = [];
          for (const gap of gaps) {
            clock.t += gap;
            // The connections stay open here (their closes are slow): the bound must hold still.
            const n = pacer.allowance('n0', open);
            assert.ok(n >= 0);
            pacer.record('n0', n);
            for (let i = 0; i < n; i++) times.push(clock.t);
          }
          assert.ok(maxInAnySecond(times) <= bound, `${maxInAnySecond(times)} > ${bound}`);
          if (clock.t >= 2000) assert.ok(times.length > 0, 'something moved');
        },
      ),
      propertyParams(300),
    );
  });

  it('chooses the connections of the troubled node only, idle ones first, skips those already leaving', () => {
    const clock = { t: 0 };
    const conns: FakeConnection[] = [];
    for (let i = 0; i < 40; i++) conns.push(new FakeConnection('sick', i % 2 === 0, clock));
    for (let i = 0; i < 40; i++) conns.push(new FakeConnection('well', true, clock));
    const drained: string[] = [];
    const drainer = new ConnectionDrainer(
      conns,
      () => [
        { id: 'sick', healthy: true },
        { id: 'well', healthy: true },
      ],
      (id) => (id === 'sick' ? 0.2 : 1),
      { ...SETTINGS, sharePerSec: 0.1 },
      (node) => drained.push(node),
      () => clock.t,
    );
    const leftBy = (t: number) => conns.filter((c) => c.leftAt !== undefined && c.leftAt <= t);
    for (; clock.t < 1000; clock.t += 250) drainer.tick();
    const first = leftBy(999);
    // 10% of what is still open: 4 of 40, then 3 of the 39 left after the first move.
    assert.equal(first.length, 3, '10% of the open connections in the first second');
    assert.ok(
      first.every((c) => c.nodeId === 'sick' && c.idle),
      'idle ones first',
    );
    for (; clock.t < 30_000; clock.t += 250) drainer.tick();
    const all = leftBy(clock.t);
    assert.ok(
      all.every((c) => c.nodeId === 'sick'),
      'never a connection of the healthy node',
    );
    assert.equal(drained.length, all.length, 'each move counted once');
    const times = all.map((c) => c.leftAt!);
    assert.ok(maxInAnySecond(times) <= 4);
    const firstBusy = Math.min(...all.filter((c) => !c.idle).map((c) => c.leftAt!));
    const lastIdle = Math.max(...all.filter((c) => c.idle).map((c) => c.leftAt!));
    assert.ok(lastIdle <= firstBusy, 'busy connections only once no idle one is left');
  });

  it('moves nothing while no node is in trouble', () => {
    const clock = { t: 0 };
    const conns = [new FakeConnection('a', true, clock), new FakeConnection('b', true, clock)];
    const drainer = new ConnectionDrainer(
      conns,
      () => [
        { id: 'a', healthy: true },
        { id: 'b', healthy: true },
      ],
      (id) => (id === 'a' ? 0.6 : 1),
      SETTINGS,
      () => assert.fail('nothing to count'),
      () => clock.t,
    );
    for (; clock.t < 5000; clock.t += 250) assert.equal(drainer.tick().size, 0);
  });
});
