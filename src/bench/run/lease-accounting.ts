/**
 * What a gateway with quota leases did with its points over a run, read from its
 * sluice_lease_points_total counters (every worker's summed by the admin listener).
 */
import { BENCH_ADMIN_TOKEN } from './gateway-config.js';

export interface LeaseAccounting {
  /** Points taken from Valkey in leases. */
  leased: number;
  /** Points spent on admitted writes. */
  spent: number;
  /** Unspent points handed back to Valkey (idle keys, shutdown, a lower limit). */
  returned: number;
  /** Points that lapsed with their window unspent: counted in Valkey, written by nobody. */
  expired: number;
  /** Points held unspent when the run ended. */
  held: number;
  /** Writes admitted without a point that Valkey granted: must be 0. */
  overAdmitted: number;
  /** Points leased and never spent nor given back (expired + held): the under-admission bound. */
  unspent: number;
}

const EVENTS = ['leased', 'spent', 'returned', 'expired'] as const;

/** The lease counters in a Prometheus text exposition. */
export function leaseAccounting(metrics: string): LeaseAccounting {
  const n = Object.fromEntries(EVENTS.map((e) => [e, 0])) as Record<
    (typeof EVENTS)[number],
    number
  >;
  for (const line of metrics.split('\n')) {
    const m = /^sluice_lease_points_total\{event="(\w+)"\} (\d+(?:\.\d+)?)$/.exec(line);
    if (m && (EVENTS as readonly string[]).includes(m[1]!)) {
      n[m[1] as (typeof EVENTS)[number]] += Number(m[2]);
    }
  }
  // Points Valkey granted that could still be spent: neither handed back nor lapsed.
  const spendable = n.leased - n.returned - n.expired;
  const held = Math.max(0, spendable - n.spent);
  return {
    ...n,
    held,
    overAdmitted: Math.max(0, n.spent - spendable),
    unspent: n.expired + held,
  };
}

/** Read the accounting off a running gateway's admin listener. */
export async function fetchLeaseAccounting(adminUrl: string): Promise<LeaseAccounting> {
  const res = await fetch(`${adminUrl}/metrics`, {
    headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` },
  });
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return leaseAccounting(await res.text());
}
