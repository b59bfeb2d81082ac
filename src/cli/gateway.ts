import { Socket } from 'node:net';
import { Option } from 'commander';
import type { Command } from 'commander';
import { ConfigError, loadGatewayConfig } from '../config/load.js';
import type { ConfigSources } from '../config/load.js';
import { defaultSaltWarning } from '../config/secrets.js';
import type { GatewayConfig } from '../config/schema.js';
import type { Logger as Log } from 'pino';
import { stopOnSignals } from './signals.js';
import type { ToPrimary, ToWorker } from '../gateway/cluster-messages.js';
import { collect, listenPort } from './flags.js';
import { CLIENT_KINDS, TOPOLOGIES } from '../store/options.js';
import { readyLine } from '../util/ready-line.js';

interface GatewayFlags {
  config?: string;
  host?: string;
  port?: number;
  adminPort?: number;
  adminToken?: string;
  valkeyClient?: string;
  valkeyMode?: string;
  valkeyNodes?: string;
  upstream?: string[];
  set?: string[];
  workers?: number | 'auto';
}

function workersFlag(text: string): number | 'auto' {
  if (text === 'auto') return 'auto';
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1)
    throw new ConfigError(`--workers "${text}": expected a count or auto`);
  return n;
}

/** Flags become dotted-path overrides, applied over the file and the environment. */
function overridesFrom(flags: GatewayFlags): Record<string, unknown> {
  const o: Record<string, unknown> = {
    'listen.host': flags.host,
    'listen.port': flags.port,
    'admin.port': flags.adminPort,
    'admin.token': flags.adminToken,
    'valkey.client': flags.valkeyClient,
    'valkey.mode': flags.valkeyMode,
    'valkey.nodes': flags.valkeyNodes?.split(',').map((s) => s.trim()),
    workers: flags.workers,
  };
  if (flags.upstream?.length) {
    o.upstreams = flags.upstream.map((spec) => {
      const [id, ...rest] = spec.split('=');
      if (!id || rest.length === 0) throw new ConfigError(`--upstream "${spec}": expected ID=URL`);
      return { id, url: rest.join('=') };
    });
  }
  for (const assignment of flags.set ?? []) {
    const eq = assignment.indexOf('=');
    if (eq <= 0) throw new ConfigError(`--set "${assignment}": expected path=value`);
    const raw = assignment.slice(eq + 1);
    let value: unknown = raw;
    try {
      value = JSON.parse(raw);
    } catch {
      // a plain string
    }
    o[assignment.slice(0, eq)] = value;
  }
  return o;
}

export function registerGateway(program: Command): void {
  program
    .command('gateway')
    .description('run the quota gateway in front of relay nodes')
    .option('-c, --config <file>', 'configuration file (YAML or JSON)')
    .option('--host <host>', 'listen address (default 127.0.0.1)')
    .option('--port <n>', 'listen port (default 8080; 0 picks a free one)', listenPort)
    .option('--admin-port <n>', 'admin/metrics port (default 8081; 0 picks a free one)', listenPort)
    .option('--admin-token <token>', 'admin bearer token (prefer SLUICE_ADMIN_TOKEN)')
    .addOption(new Option('--valkey-client <name>', 'Valkey client').choices(CLIENT_KINDS))
    .addOption(new Option('--valkey-mode <mode>', 'Valkey topology').choices(TOPOLOGIES))
    .option('--valkey-nodes <list>', 'comma-separated host:port list')
    .option(
      '--workers <n>',
      'gateway processes behind the port: a number, or auto (one per core)',
      workersFlag,
    )
    .option('--upstream <id=url>', "a relay node (repeatable; replaces the file's list)", collect)
    .option(
      '--set <path=value>',
      'any setting by path, e.g. quotas.gateways=2 (repeatable)',
      collect,
    )
    .addHelpText(
      'after',
      '\nSettings come from the file, then SLUICE__<section>__<key> environment variables\n' +
        '(e.g. SLUICE__valkey__client=iovalkey), then flags. SLUICE_ADMIN_TOKEN sets the admin token.\n' +
        'SIGHUP reloads quotas and identity settings from the file without dropping connections.',
    )
    .action(async (flags: GatewayFlags) => {
      const sources: ConfigSources = {
        file: flags.config,
        env: process.env,
        overrides: overridesFrom(flags),
      };
      const config = loadGatewayConfig(sources);
      const { default: pino } = await import('pino');
      const { workerCount } = await import('../gateway/cluster-messages.js');
      const { default: cluster } = await import('node:cluster');
      const log = pino(
        { level: config.logging.level, base: { service: 'sluice-gateway' } },
        pino.destination(2),
      );
      const workers = workerCount(config.workers);
      if (workers > 1 && cluster.isPrimary) {
        await runPrimary(config, sources, workers, log);
        return;
      }
      // Once, at start (in the primary when there is one): SIGHUP does not reload the salt.
      const saltWarning = defaultSaltWarning(config);
      if (saltWarning && !cluster.isWorker) log.warn(saltWarning);
      await runGatewayProcess(config, sources, log, cluster.isWorker);
    });
}

/** Reload from the same sources; a bad file keeps the running configuration. */
function reloadFrom(sources: ConfigSources, log: Log, apply: (next: GatewayConfig) => void): void {
  try {
    apply(loadGatewayConfig(sources));
    log.info(
      'configuration reloaded (quotas and identity; listeners, Valkey and upstreams need a restart)',
    );
  } catch (err) {
    // One line: what is wrong (the first problem; `err` holds them all) and what to do.
    const message = (err as Error).message;
    const problem = message.split('\n')[1]?.trim() ?? message.split(': fix')[0];
    const file = sources.file ?? 'the configuration file';
    log.error(
      { err: message },
      `configuration reload rejected (${problem}); the running configuration stays: fix ${file} ` +
        `and send SIGHUP again (\`sluice config check ${file}\` checks it first)`,
    );
  }
}

/** One gateway process: alone (with its admin listener), or a worker of a primary. */
async function runGatewayProcess(
  config: GatewayConfig,
  sources: ConfigSources,
  log: Log,
  worker: boolean,
): Promise<void> {
  const { startGateway } = await import('../gateway/server.js');
  const gateway = await startGateway(config, log, { worker });
  // Last resort, once serving. The gateway keeps running: its state is per connection and
  // per request, so what an unexpected error can have left wrong is the one client it was
  // handling, while exiting would cut every client off, a lever for anyone who finds such
  // an error. It is logged and counted (sluice_internal_errors_total, to alert on) instead.
  // Failures at startup still exit, above.
  process.on('uncaughtException', (err) => gateway.internalError('uncaught-exception', err));
  process.on('unhandledRejection', (err) => gateway.internalError('unhandled-rejection', err));
  const reload = () => reloadFrom(sources, log, (next) => gateway.reload(next));
  const stop = stopOnSignals(config.shutdownGraceMs, () => gateway.close(), log);
  if (!worker) {
    process.on('SIGHUP', reload);
    // Last: whoever reads this line may signal at once, so every handler is in place.
    console.log(readyLine({ ready: 'gateway', url: gateway.url, admin: gateway.adminUrl }));
    return;
  }
  const { AggregatorRegistry } = await import('prom-client');
  const { isMessage } = await import('../gateway/cluster-messages.js');
  // Constructing one is what makes prom-client answer the primary's metric requests here.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([gateway.metricsRegistry]);
  // The primary signals its workers itself; a SIGHUP sent to the whole group is its to handle.
  process.on('SIGHUP', () => undefined);
  process.on('message', (message: unknown, handle: unknown) => {
    if (isMessage<ToWorker>(message, 'sluice:reload')) reload();
    if (isMessage<Extract<ToWorker, { type: 'sluice:connection' }>>(message, 'sluice:connection')) {
      if (handle instanceof Socket) {
        gateway.accept(handle, message.head ? Buffer.from(message.head, 'base64') : undefined);
      }
    }
    if (isMessage<Extract<ToWorker, { type: 'sluice:admin' }>>(message, 'sluice:admin')) {
      void gateway.injectAdmin(message.request).then((response) => {
        const answer: ToPrimary = { type: 'sluice:admin-response', id: message.id, response };
        process.send?.(answer);
      });
    }
  });
  // No orphans: a worker whose primary is gone stops.
  process.on('disconnect', () => stop('primary gone'));
  const ready: ToPrimary = { type: 'sluice:ready' };
  process.send?.(ready);
}

/** The primary of `workers` gateway processes: forks them, holds the admin listener. */
async function runPrimary(
  config: GatewayConfig,
  sources: ConfigSources,
  workers: number,
  log: Log,
): Promise<void> {
  const saltWarning = defaultSaltWarning(config);
  if (saltWarning) log.warn(saltWarning);
  const { startPrimary } = await import('../gateway/cluster-primary.js');
  const primary = await startPrimary(config, workers, log);
  process.on('uncaughtException', (err) => log.error({ err }, 'primary: uncaught exception'));
  process.on('unhandledRejection', (err) => log.error({ err }, 'primary: unhandled rejection'));
  // Checked here first, so a bad file is reported once and no worker sees it.
  process.on('SIGHUP', () => reloadFrom(sources, log, () => primary.reload()));
  // Workers have their own grace; the primary waits for them, plus a margin.
  stopOnSignals(config.shutdownGraceMs + 5000, () => primary.close(), log);
  console.log(
    readyLine({
      ready: 'gateway',
      url: primary.url,
      admin: primary.adminUrl,
      workers: primary.workerPids(),
    }),
  );
}
