import { Counter, Gauge, Registry } from 'prom-client';
import type { RejectReason } from './validate.js';

/** Everything /stats reports; /metrics publishes the same numbers. */
export interface RelayStats {
  nodeId: string;
  pid: number;
  uptimeSeconds: number;
  rssBytes: number;
  rssAnonBytes: number;
  heapUsedBytes: number;
  memtableBytes: number;
  memtableSlabs: number;
  backlogBytes: number;
  backlogEvents: number;
  drainRateBytesPerSec: number;
  drainedBytesPerSec: number;
  flushedBytes: number;
  flushErrors: number;
  dataFileBytes: number;
  eventsStored: number;
  eventsAccepted: number;
  eventsDuplicate: number;
  eventsRejected: Record<RejectReason, number>;
  spikeBytes: number;
  spikesTotal: number;
  connections: number;
  subscriptions: number;
  workIterations: number;
  workDigest: string;
}

type NumericKey = {
  [K in keyof RelayStats]: RelayStats[K] extends number ? K : never;
}[keyof RelayStats];

const GAUGES: [string, NumericKey, string][] = [
  ['relay_rss_bytes', 'rssBytes', 'Resident set size of the relay process'],
  ['relay_rss_anon_bytes', 'rssAnonBytes', 'Resident anonymous memory (RSS without file pages)'],
  ['relay_heap_used_bytes', 'heapUsedBytes', 'V8 heap in use'],
  ['relay_memtable_bytes', 'memtableBytes', 'Bytes held in memtable slabs'],
  ['relay_memtable_slabs', 'memtableSlabs', 'Memtable slabs held'],
  ['relay_backlog_bytes', 'backlogBytes', 'Accepted bytes not yet flushed to disk'],
  ['relay_backlog_events', 'backlogEvents', 'Accepted events not yet fully flushed to disk'],
  ['relay_drain_rate_bytes_per_second', 'drainRateBytesPerSec', 'Configured drain rate'],
  ['relay_drained_bytes_per_second', 'drainedBytesPerSec', 'Measured drain rate, last ~1 s'],
  ['relay_data_file_bytes', 'dataFileBytes', 'Size of the append-only data file'],
  ['relay_events_stored', 'eventsStored', 'Events in the store (including earlier runs)'],
  ['relay_spike_bytes', 'spikeBytes', 'Bytes currently held by memory spikes'],
  ['relay_connections', 'connections', 'Open WebSocket connections'],
  ['relay_subscriptions', 'subscriptions', 'Open subscriptions'],
  ['relay_uptime_seconds', 'uptimeSeconds', 'Seconds since the relay started'],
];

const COUNTERS: [string, NumericKey, string][] = [
  ['relay_flushed_bytes_total', 'flushedBytes', 'Bytes flushed to disk by this process'],
  ['relay_flush_errors_total', 'flushErrors', 'Failed flush writes'],
  ['relay_events_accepted_total', 'eventsAccepted', 'Events accepted and stored'],
  ['relay_events_duplicate_total', 'eventsDuplicate', 'Events already stored'],
  ['relay_spikes_total', 'spikesTotal', 'Memory spikes started'],
];

export interface RelayMetrics {
  registry: Registry;
  /** The Prometheus text exposition of one fresh snapshot. */
  render(): Promise<string>;
}

/** A registry of this relay's own (never the process-global one), fed by `snapshot`. */
export function createMetrics(nodeId: string, snapshot: () => RelayStats): RelayMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ node_id: nodeId });
  // One snapshot per scrape, read by every collect() below.
  let current: RelayStats | undefined;
  const stats = (): RelayStats => (current ??= snapshot());

  for (const [name, key, help] of GAUGES) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(stats()[key]);
      },
    });
  }
  for (const [name, key, help] of COUNTERS) {
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset();
        this.inc(stats()[key]);
      },
    });
  }
  new Counter({
    name: 'relay_events_rejected_total',
    help: 'Events refused, by reason',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [reason, n] of Object.entries(stats().eventsRejected)) this.inc({ reason }, n);
    },
  });

  return {
    registry,
    async render() {
      current = undefined;
      try {
        return await registry.metrics();
      } finally {
        current = undefined;
      }
    },
  };
}
