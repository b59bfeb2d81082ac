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

/** The numbers /metrics publishes, with their help; each one's name comes from its key. */
const HELP: Partial<Record<NumericKey, string>> = {
  rssBytes: 'Resident set size of the relay process',
  rssAnonBytes: 'Resident anonymous memory (RSS without file pages)',
  heapUsedBytes: 'V8 heap in use',
  memtableBytes: 'Bytes held in memtable slabs',
  memtableSlabs: 'Memtable slabs held',
  backlogBytes: 'Accepted bytes not yet flushed to disk',
  backlogEvents: 'Accepted events not yet fully flushed to disk',
  drainRateBytesPerSec: 'Configured drain rate',
  drainedBytesPerSec: 'Measured drain rate, last ~1 s',
  dataFileBytes: 'Size of the append-only data file',
  eventsStored: 'Events in the store (including earlier runs)',
  spikeBytes: 'Bytes currently held by memory spikes',
  connections: 'Open WebSocket connections',
  subscriptions: 'Open subscriptions',
  uptimeSeconds: 'Seconds since the relay started',
  flushedBytes: 'Bytes flushed to disk by this process',
  flushErrors: 'Failed flush writes',
  eventsAccepted: 'Events accepted and stored',
  eventsDuplicate: 'Events already stored',
  spikesTotal: 'Memory spikes started',
};
/** Totals since the process started; every other number is a gauge. */
const COUNTERS = new Set<NumericKey>([
  'flushedBytes',
  'flushErrors',
  'eventsAccepted',
  'eventsDuplicate',
  'spikesTotal',
]);

/** `drainedBytesPerSec` is relay_drained_bytes_per_second; counters end in `_total`. */
function metricName(key: NumericKey): string {
  const snake = key.replace(/PerSec$/, 'PerSecond').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
  const total = COUNTERS.has(key) && !snake.endsWith('_total') ? '_total' : '';
  return `relay_${snake}${total}`;
}

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

  for (const [key, help] of Object.entries(HELP) as [NumericKey, string][]) {
    const name = metricName(key);
    if (COUNTERS.has(key)) {
      new Counter({
        name,
        help,
        registers: [registry],
        collect() {
          this.reset();
          this.inc(stats()[key]);
        },
      });
    } else {
      new Gauge({
        name,
        help,
        registers: [registry],
        collect() {
          this.set(stats()[key]);
        },
      });
    }
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
