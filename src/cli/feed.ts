import { InvalidArgumentError, Option } from 'commander';
import type { Command } from 'commander';
import type { FeedProcessOptions } from '../pressure/feed/feed-process.js';
import { stopOnSignals } from './signals.js';
import {
  listenPort,
  parseBytes,
  positiveInt,
  positiveNumber,
  valkeyClientOption,
  valkeyModeOption,
} from './flags.js';
import { DEFAULT_FAST_ABOVE } from '../pressure/feed/tick-pace.js';
import { DEFAULT_LAW, LAWS, LAW_NAMES } from '../pressure/laws/registry.js';

type FeedFlags = FeedProcessOptions;

/** A share in (0, 1]: 0 would be a target of nothing. */
function targetFraction(text: string): number {
  const x = Number(text);
  if (!(x > 0 && x <= 1)) {
    throw new InvalidArgumentError(`"${text}" is not a fraction of the limit (0 < f <= 1)`);
  }
  return x;
}

/** Closing the Valkey client is all a feed has to do. */
const FEED_STOP_GRACE_MS = 5_000;

export function registerFeed(program: Command): void {
  program
    .command('feed')
    .description("sample a relay node's memory, run the control law, publish its limit multiplier")
    .requiredOption('--node-id <id>', 'the relay node, as the gateways know it')
    .option('--pid <pid>', 'source: a process (RssAnon from /proc/<pid>/status)', positiveInt)
    .option(
      '--cgroup <dir>',
      'source: a memory cgroup, v1 or v2 (its use less inactive file pages)',
    )
    .option('--prometheus <url>', 'source: a Prometheus text endpoint (with --metric)')
    .option('--metric <name>', 'metric name for --prometheus', 'relay_rss_anon_bytes')
    .option('--relay <url>', 'source: a sluice reference relay (its memory metric and its backlog)')
    .option('--target-bytes <n>', 'the memory the node should stay under (e.g. 512MiB)', parseBytes)
    .option(
      '--target-fraction <f>',
      "with --cgroup: the target as a share of the cgroup's memory limit (0 < f <= 1)",
      targetFraction,
    )
    .option(
      '--tick-ms <n>',
      'control period at rest (publication heartbeat; lease = 3 ticks)',
      positiveInt,
      500,
    )
    .option(
      '--fast-tick-ms <n>',
      'control period while memory is at or above --fast-above x target (default 50; = --tick-ms: off)',
      positiveInt,
    )
    .option(
      '--fast-above <u>',
      'share of the target from which the fast tick runs (slow again 0.1 below)',
      positiveNumber,
      DEFAULT_FAST_ABOVE,
    )
    .addOption(
      new Option(
        '--law <law>',
        `control law (${LAW_NAMES.map((n) => `${n}: ${LAWS[n].description}`).join('; ')})`,
      )
        .choices(LAW_NAMES)
        .default(DEFAULT_LAW),
    )
    .option(
      '--acceptable-backlog <bytes>',
      'with --relay: the backlog the relay may hold; turns on the backlog term (with --base-rate)',
      parseBytes,
    )
    .option(
      '--base-rate <bytes>',
      'write bytes/s that m = 1 admits across all gateways',
      parseBytes,
    )
    .option(
      '--forget-budget',
      'start from nothing learned: drop the estimate a previous feed of this node saved (a ' +
        'replaced node, or tests and benchmarks that share one Valkey)',
    )
    .option(
      '--no-learn-budget',
      "don't learn the node's write budget (by default the feed learns what the node drains " +
        'from what the gateways admit and its memory, and publishes it as its budget)',
    )
    .option(
      '--drain-stats <url>',
      "a sluice reference relay's /stats: its own measured drain, for the learned budget " +
        '(--relay gives it already)',
    )
    .option(
      '--budget-flat <bytes>',
      'learned budget: memory rising slower than this per second is flat (noise)',
      parseBytes,
    )
    .option(
      '--budget-min <bytes>',
      'learned budget: the least drain (bytes/s) a decrease goes to',
      parseBytes,
    )
    .addOption(valkeyClientOption())
    .addOption(valkeyModeOption())
    .option('--valkey-nodes <list>', 'comma-separated host:port list', '127.0.0.1:6379')
    .option('--host <host>', "address of the feed's /metrics", '127.0.0.1')
    .option('--port <n>', "port of the feed's /metrics (0 picks one)", listenPort, 0)
    .action(async (flags: FeedFlags) => {
      const sources = [flags.pid, flags.cgroup, flags.prometheus, flags.relay].filter(
        (s) => s !== undefined,
      );
      if (sources.length !== 1) {
        // A plain Error: commander's own errors exit without their message from an action.
        throw new Error('give exactly one source: --pid, --cgroup, --prometheus or --relay');
      }
      if ((flags.targetBytes === undefined) === (flags.targetFraction === undefined)) {
        throw new Error('give exactly one target: --target-bytes or --target-fraction');
      }
      if (flags.targetFraction !== undefined && flags.cgroup === undefined) {
        throw new Error(
          "--target-fraction is a share of a cgroup's limit: give it with --cgroup, or give --target-bytes",
        );
      }
      const { runFeed } = await import('../pressure/feed/feed-process.js');
      // In place before the ready line: whoever reads it may signal at once.
      const starting = runFeed(flags);
      stopOnSignals(FEED_STOP_GRACE_MS, async () => (await starting)());
      try {
        await starting;
      } catch (err) {
        throw withSourceFix(err, flags);
      }
    });
}

/**
 * A memory source that cannot be read at start ("cannot read ..."), with what to give
 * instead; other errors (Valkey, the /metrics port) are explained in operator-errors.ts.
 */
function withSourceFix(err: unknown, flags: FeedFlags): unknown {
  if (!(err instanceof Error) || !err.message.startsWith('cannot read ')) return err;
  const fix =
    flags.pid !== undefined
      ? "give --pid the id of the relay's running process on this machine"
      : flags.cgroup !== undefined
        ? "give --cgroup the relay's cgroup directory (e.g. /sys/fs/cgroup/system.slice/relay.service)"
        : flags.prometheus !== undefined
          ? 'give --prometheus the URL of a running Prometheus text endpoint (and --metric its memory metric)'
          : 'give --relay the URL of a running sluice reference relay';
  return new Error(`${err.message}: ${fix}`);
}
