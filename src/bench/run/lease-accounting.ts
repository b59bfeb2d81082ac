/**
 * What a gateway with quota leases did with its points over a run, read from its
 * sluice_lease_points_total counters (every worker's summed by the admin listener).
 */
import { parsePrometheusValue } from '../../pressure/feed/samplers.js';

export interface LeaseAccounting {
  /** Points taken from Valkey in leases. */
  leased: number;
  /** Points spent on admitted writes, less those refunded (writes the relay did not do). */
  spent: number;
  /** Unspent points handed back to Valkey (idle keys, shutdown, a lower limit). */
  returned: number;
  /** Points that lapsed with their window unspent: counted in Valkey, written by nobody. */
  expired: number;
  /**
   * Of the points spent, those spent on credit (a key's first write of its window, before
   * its take reached Valkey: quotas.lease.credit).
   */
  credited: number;
  /** Points held unspent when the run ended. */
  held: number;
  /** Writes admitted without a point that Valkey granted: must be 0. */
  overAdmitted: number;
  /** Points leased and never spent nor given back (expired + held): the under-admission bound. */
  unspent: number;
}

const EVENTS = ['leased', 'spent', 'refunded', 'returned', 'expired', 'credited'] as const;

/** The lease counters in a Prometheus text exposition (a counter never moved reads 0). */
export function leaseAccounting(metrics: string): LeaseAccounting {
  const [leased, spentGross, refunded, returned, expired, credited] = EVENTS.map(
    (event) =>
      parsePrometheusValue(metrics, 'sluice_lease_points_total', `{event="${event}"}`) ?? 0,
  ) as [number, number, number, number, number, number];
  const spent = spentGross - refunded;
  // Points Valkey granted that could still be spent: neither handed back nor lapsed.
  const spendable = leased - returned - expired;
  const held = Math.max(0, spendable - spent);
  return {
    leased,
    spent,
    returned,
    expired,
    credited,
    held,
    overAdmitted: Math.max(0, spent - spendable),
    unspent: expired + held,
  };
}

/** Read the accounting off a running gateway's admin listener (/metrics needs no token). */
export async function fetchLeaseAccounting(adminUrl: string): Promise<LeaseAccounting> {
  const res = await fetch(`${adminUrl}/metrics`);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  return leaseAccounting(await res.text());
}
