import { Option } from 'commander';
import type { Command } from 'commander';
import { ConfigError, loadGatewayConfig } from '../config/load.js';
import type { ConfigSources } from '../config/load.js';
import { defaultSaltWarning } from '../config/secrets.js';
import { listenPort } from './valkey.js';

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
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
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
    .addOption(
      new Option('--valkey-client <name>', 'Valkey client').choices([
        'valkey-glide',
        'iovalkey',
        'ioredis',
      ]),
    )
    .addOption(
      new Option('--valkey-mode <mode>', 'Valkey topology').choices(['standalone', 'cluster']),
    )
    .option('--valkey-nodes <list>', 'comma-separated host:port list')
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
      const { startGateway } = await import('../gateway/server.js');
      const log = pino(
        { level: config.logging.level, base: { service: 'sluice-gateway' } },
        pino.destination(2),
      );
      // Once, at start: SIGHUP does not reload the salt.
      const saltWarning = defaultSaltWarning(config);
      if (saltWarning) log.warn(saltWarning);
      const gateway = await startGateway(config, log);
      // Last resort, once serving. The gateway keeps running: its state is per connection and
      // per request, so what an unexpected error can have left wrong is the one client it was
      // handling, while exiting would cut every client off, a lever for anyone who finds such
      // an error. It is logged and counted (sluice_internal_errors_total, to alert on) instead.
      // Failures at startup still exit, above.
      process.on('uncaughtException', (err) => gateway.internalError('uncaught-exception', err));
      process.on('unhandledRejection', (err) => gateway.internalError('unhandled-rejection', err));

      process.on('SIGHUP', () => {
        try {
          const next = loadGatewayConfig(sources);
          gateway.reload(next);
          log.info(
            'configuration reloaded (quotas and identity; listeners, Valkey and upstreams need a restart)',
          );
        } catch (err) {
          log.error(
            { err: (err as Error).message },
            'configuration reload rejected; keeping the current one',
          );
        }
      });
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        log.info({ signal }, 'shutting down');
        const force = setTimeout(() => process.exit(1), config.shutdownGraceMs);
        force.unref();
        gateway.close().then(
          () => process.exit(0),
          (err: unknown) => {
            log.error({ err }, 'shutdown failed');
            process.exit(1);
          },
        );
      };
      process.on('SIGTERM', () => stop('SIGTERM'));
      process.on('SIGINT', () => stop('SIGINT'));
      // Last: whoever reads this line may signal at once, so every handler is in place.
      console.log(`sluice gateway ready: ${gateway.url} admin=${gateway.adminUrl}`);
    });
}
