/**
 * A quota decider in simulated time, for property tests of what refusals say: a fixed window
 * of `windowSec` per identity, opened by its first charge, `limit` points in it. A refusal
 * shows the seconds until the window ends (rounded up), as the real limiter's does.
 */
import type { QuotaDecision, QuotaRequest } from '../../src/quota/decider.js';

interface Window {
  used: number;
  endsAt: number;
}

export class ClockedDecider {
  private readonly windows = new Map<string, Window>();
  storeDown = false;

  constructor(
    private readonly limit: number,
    private readonly windowSec: number,
    private readonly now: () => number,
  ) {}

  decide(req: QuotaRequest): Promise<QuotaDecision> {
    const now = this.now();
    let w = this.windows.get(req.identity.key);
    if (!w || w.endsAt <= now) {
      w = { used: 0, endsAt: now + this.windowSec * 1000 };
      this.windows.set(req.identity.key, w);
    }
    w.used += req.cost;
    const admitted = w.used <= this.limit;
    return Promise.resolve({
      outcome: admitted ? 'allowed' : 'limited',
      admitted,
      policy: `${req.cls}s`,
      limit: this.limit,
      windowSec: this.windowSec,
      remaining: Math.max(0, this.limit - w.used),
      resetSec: Math.ceil((w.endsAt - now) / 1000),
      multiplier: 1,
      fromMemory: false,
      receipt: { into: 'store', until: w.endsAt },
    } as QuotaDecision);
  }

  refund(req: QuotaRequest): Promise<boolean> {
    const w = this.windows.get(req.identity.key);
    if (w && w.endsAt > this.now()) w.used = Math.max(0, w.used - req.cost);
    return Promise.resolve(true);
  }

  knownOverLimit(): null {
    return null;
  }

  chargesNode(): boolean {
    return false;
  }

  trackedClients(): Record<string, number> {
    return {};
  }
}
