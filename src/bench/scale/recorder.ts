/**
 * What each decision adds to a run's figures (simulated or real): its latency, its outcome,
 * and its admission or refusal in the ledger, per key and window.
 */
import type { QuotaDecision, QuotaRequest } from '../../quota/decider.js';
import type { Identity } from '../../quota/policy.js';
import type { ClientKey } from '../../store/index.js';
import { CountHistogram } from './figures.js';
import type { AdmissionLedger } from './ledger.js';

/** A write request for the decider from a drawn client (its key part is its hash tag). */
export function writeRequest(client: string, nodeId: string): QuotaRequest {
  const identity = {
    source: 'ip',
    value: `ip:${client}`,
    raw: client,
    tier: 'default',
    key: client as ClientKey,
  } as Identity;
  return { identity, ip: client, cls: 'write', cost: 1, nodeId };
}

export class DecisionRecorder {
  readonly latency = new CountHistogram();
  readonly outcomes: Record<string, number> = {};
  writes = 0;
  admitted = 0;

  constructor(
    private readonly ledger: AdmissionLedger,
    /** Latencies are kept rounded to this many ms (the simulation's tick, or 0.01 ms). */
    private readonly resolutionMs: number,
  ) {}

  /**
   * One decision, asked at `askedAt`, answered at `now`; an admission is placed at `countedAt`
   * (when Valkey counted it, if known) else at `now`.
   */
  record(
    client: string,
    d: QuotaDecision | null,
    askedAt: number,
    now: number,
    countedAt?: number,
  ): void {
    this.writes++;
    const r = this.resolutionMs;
    this.latency.add(Math.round((now - askedAt) / r) * r);
    const outcome = d?.outcome ?? 'free';
    this.outcomes[outcome] = (this.outcomes[outcome] ?? 0) + 1;
    if (d?.admitted) {
      this.admitted++;
      this.ledger.admit(client, countedAt ?? now, 1, d.outcome === 'insured');
    } else {
      this.ledger.refuse(client, now, 1);
    }
  }

  latencyFigures(): { p50: number; p99: number; p999: number; max: number } {
    const h = this.latency;
    return {
      p50: h.quantile(0.5),
      p99: h.quantile(0.99),
      p999: h.quantile(0.999),
      max: h.quantile(1),
    };
  }
}
