import { Option } from 'commander';
import type { Command } from 'commander';
import { stopOnSignals } from './signals.js';
import { list, listenPort, positiveInt } from './flags.js';
import { TOPOLOGIES } from '../store/options.js';
import { readyLine } from '../util/ready-line.js';

interface PeerFlags {
  host: string;
  port: number;
  upstream: string;
  valkeyMode: 'standalone' | 'cluster';
  valkeyNodes: string;
  points: number;
  windowSec: number;
  trustedProxies?: string;
  commandTimeoutMs: number;
  connectTimeoutMs: number;
  maxBodyBytes: number;
  skipOnError?: boolean;
  nameSpace: string;
}

/** A TCP port, or 0 for a free one. */

/** `sluice bench peer`: the peer baseline (Fastify + @fastify/rate-limit on Valkey). */
export function registerPeer(bench: Command): void {
  bench
    .command('peer')
    .description(
      'the peer baseline for benchmarks: a Fastify reverse proxy with @fastify/rate-limit ' +
        '(Redis store, ioredis) on Valkey, writes limited per client IP',
    )
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--port <n>', 'port; 0 picks a free one', listenPort, 0)
    .requiredOption('--upstream <url>', 'the relay, e.g. http://127.0.0.1:7001')
    .addOption(
      new Option('--valkey-mode <mode>', 'Valkey topology')
        .choices(TOPOLOGIES)
        .default('standalone'),
    )
    .option('--valkey-nodes <list>', 'comma-separated host:port list', '127.0.0.1:6379')
    .option('--points <n>', 'writes per client per window', positiveInt, 100)
    .option('--window-sec <s>', 'window length in seconds', positiveInt, 60)
    .option(
      '--trusted-proxies <list>',
      'comma-separated peers whose X-Forwarded-For is believed (default: none)',
    )
    .option('--command-timeout-ms <n>', 'ioredis commandTimeout', positiveInt, 250)
    .option('--connect-timeout-ms <n>', 'ioredis connectTimeout', positiveInt, 2000)
    .option('--max-body-bytes <n>', 'largest request body', positiveInt, 1024 * 1024)
    .option('--name-space <prefix>', "the plugin's key prefix in Valkey", 'fastify-rate-limit-')
    .option('--skip-on-error', "admit writes when Valkey fails (the plugin's default: 500)")
    .action(async (flags: PeerFlags) => {
      if (!URL.canParse(flags.upstream) || !/^https?:$/.test(new URL(flags.upstream).protocol)) {
        throw new Error(`--upstream "${flags.upstream}" is not an http(s) URL`);
      }
      const nodes = list(flags.valkeyNodes);
      if (nodes.length === 0) throw new Error('--valkey-nodes: give at least one host:port');
      // Loaded here: every command's modules would otherwise sit in every process's memory.
      const { startPeerGateway } = await import('../bench/peer-gateway.js');
      const starting = startPeerGateway({
        host: flags.host,
        port: flags.port,
        upstream: flags.upstream,
        valkey: { mode: flags.valkeyMode, nodes },
        points: flags.points,
        windowSec: flags.windowSec,
        trustedProxies: list(flags.trustedProxies ?? ''),
        commandTimeoutMs: flags.commandTimeoutMs,
        connectTimeoutMs: flags.connectTimeoutMs,
        maxBodyBytes: flags.maxBodyBytes,
        skipOnError: flags.skipOnError ?? false,
        nameSpace: flags.nameSpace,
      });
      stopOnSignals(10_000, async () => (await starting).close());
      const started = await starting;
      // The one line on stdout; the harness waits for it and reads the settings from it.
      console.log(readyLine({ ready: 'peer', url: started.url, settings: started.settings }));
    });
}
