import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import {
  DEFAULT_DRAIN_BYTES_PER_SEC,
  DEFAULT_MAX_EVENT_BYTES,
  defaultDataDir,
} from '../relay/defaults.js';
import type { RelayConfig } from '../relay/server.js';
import { PROJECT_ROOT, packageVersion, runDir } from '../harness/paths.js';
import { stopOnSignals } from './signals.js';
import { integerIn, parseBytes } from './flags.js';
import { readyLine } from '../util/ready-line.js';

/** A relay flushes its memtable on close: time enough for that, then it is cut. */
const RELAY_STOP_GRACE_MS = 10_000;

function nodeId(value: string): string {
  // It names a directory under the run dir, so keep it to a safe alphabet.
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(value)) {
    throw new InvalidArgumentError(
      `"${value}" is not a node id (1-64 of letters, digits, ".", "_", "-"; not starting with a dot or dash)`,
    );
  }
  return value;
}

function publicUrl(value: string): string {
  if (!/^wss?:\/\/[^\s/]+/.test(value) || !URL.canParse(value)) {
    throw new InvalidArgumentError(`"${value}" is not a ws:// or wss:// URL`);
  }
  return value;
}

interface RelayFlags {
  host: string;
  port: number;
  nodeId: string;
  drainBytesPerSec: number;
  dataDir?: string;
  fresh?: boolean;
  workIterations: number;
  spikeBytes?: number;
  spikeEveryMs?: number;
  spikeHoldMs?: number;
  maxEventBytes: number;
  /** commander's `--no-verify-signatures`: false when given. */
  verifySignatures?: boolean;
  adminToken?: string;
  publicUrl?: string;
}

/** Options that are wrong together (single values are checked by their parsers). */
export class RelayOptionsError extends Error {
  override name = 'RelayOptionsError';
}

export function toConfig(flags: RelayFlags): RelayConfig {
  if (flags.maxEventBytes < 1024) throw new RelayOptionsError('--max-event-bytes must be >= 1KiB');
  const spikeGiven = [flags.spikeBytes, flags.spikeEveryMs].filter((v) => v !== undefined).length;
  if (spikeGiven === 1) {
    throw new RelayOptionsError('give --spike-bytes and --spike-every-ms together');
  }
  if (flags.spikeHoldMs !== undefined && spikeGiven === 0) {
    throw new RelayOptionsError('--spike-hold-ms needs --spike-bytes and --spike-every-ms');
  }
  if (flags.spikeBytes === 0) throw new RelayOptionsError('--spike-bytes must be above 0');
  // Empty counts as unset (an empty variable passed through by Compose or a script).
  const adminToken = flags.adminToken || undefined;
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new RelayOptionsError(
      'the admin token (--admin-token or SLUICE_RELAY_ADMIN_TOKEN) must have at least 16 characters',
    );
  }
  const config: RelayConfig = {
    host: flags.host,
    port: flags.port,
    nodeId: flags.nodeId,
    dataDir: flags.dataDir ?? defaultDataDir(runDir(), flags.nodeId),
    version: packageVersion(PROJECT_ROOT) ?? '0.0.0',
    fresh: flags.fresh ?? false,
    drainBytesPerSec: flags.drainBytesPerSec,
    workIterations: flags.workIterations,
    maxEventBytes: flags.maxEventBytes,
  };
  if (adminToken !== undefined) config.adminToken = adminToken;
  if (flags.verifySignatures === false) config.verifySignatures = false;
  if (flags.publicUrl !== undefined) config.publicUrl = flags.publicUrl;
  if (flags.spikeBytes !== undefined && flags.spikeEveryMs !== undefined) {
    config.spike = {
      bytes: flags.spikeBytes,
      everyMs: flags.spikeEveryMs,
      holdMs: flags.spikeHoldMs ?? Math.max(1, Math.floor(flags.spikeEveryMs / 2)),
    };
  }
  return config;
}

export function registerRelay(program: Command): void {
  program
    .command('relay')
    .description(
      'run a reference Nostr relay node: events held in memory and drained to disk at a set rate',
    )
    .requiredOption(
      '--node-id <id>',
      'name of this node (in stats, metrics and the data dir)',
      nodeId,
    )
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'port; 0 picks a free one', integerIn(0, 65535, 'a TCP port'), 0)
    .option(
      '--drain-bytes-per-sec <n>',
      'how fast the memtable drains to disk (e.g. 2MiB; 0 never drains)',
      parseBytes,
      DEFAULT_DRAIN_BYTES_PER_SEC,
    )
    .option('--data-dir <dir>', 'where the append-only file lives (default <run dir>/relay/<id>)')
    .option('--fresh', 'start with an empty data file instead of reloading it')
    .option(
      '--work-iterations <n>',
      'rounds of sha256 over each accepted event (CPU-heavy workload)',
      integerIn(0, 1_000_000, 'an iteration count'),
      0,
    )
    .option('--spike-bytes <n>', 'periodic memory spike size (with --spike-every-ms)', parseBytes)
    .option(
      '--spike-every-ms <ms>',
      'start a memory spike this often',
      integerIn(10, 86_400_000, 'an interval in ms'),
    )
    .option(
      '--spike-hold-ms <ms>',
      'how long each spike is held (default half the interval)',
      integerIn(1, 86_400_000, 'a duration in ms'),
    )
    .option(
      '--max-event-bytes <n>',
      'largest event accepted (serialised)',
      parseBytes,
      DEFAULT_MAX_EVENT_BYTES,
    )
    .option(
      '--no-verify-signatures',
      "store events whose signature does not verify (the id is still checked): a relay that does not verify, for tests of a gateway's nostr.verify",
    )
    .option(
      '--public-url <url>',
      "NIP-42 AUTH: send a challenge on connect and accept AUTH events whose relay tag is this URL (the one clients use, e.g. the gateway's)",
      publicUrl,
    )
    .addOption(
      new Option(
        '--admin-token <token>',
        'bearer token of /admin/spike and /admin/drain, which answer 404 without one (prefer the environment variable)',
      ).env('SLUICE_RELAY_ADMIN_TOKEN'),
    )
    .action(async (flags: RelayFlags) => {
      // Loaded here: every command's modules would otherwise sit in every process's memory.
      const { startRelay } = await import('../relay/server.js');
      const starting = startRelay(toConfig(flags));
      stopOnSignals(RELAY_STOP_GRACE_MS, async () => (await starting).close());
      const started = await starting;
      // The one line on stdout; tests and scripts wait for it.
      console.log(readyLine({ ready: 'relay', url: started.url, node: started.nodeId }));
      if (started.reloadedEvents > 0) {
        console.error(`relay ${started.nodeId}: reloaded ${started.reloadedEvents} events`);
      }
    });
}
