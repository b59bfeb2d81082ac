import { InvalidArgumentError } from 'commander';
import type { Command } from 'commander';
import {
  DEFAULT_CLUSTER_BASE_PORT,
  DEFAULT_STANDALONE_PORT,
  startInstance,
  statusReport,
  stopAll,
  stopInstance,
} from '../valkey/embedded.js';
import type { InstanceSelector, Logger } from '../valkey/embedded.js';
import { CLUSTER_SIZE, formCluster, isClusterFormed } from '../valkey/cluster.js';
import { parseNodeAddress } from '../store/options.js';
import type { NodeAddress } from '../store/options.js';
import { parsePort, positiveInt } from './flags.js';

function nodeList(value: string): NodeAddress[] {
  const nodes = value.split(',').map((text) => {
    try {
      return parseNodeAddress(text);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  });
  if (nodes.length !== CLUSTER_SIZE) {
    throw new InvalidArgumentError(`give ${CLUSTER_SIZE} nodes, got ${nodes.length}`);
  }
  return nodes;
}

interface InstanceFlags {
  cluster?: boolean;
  port?: number;
  basePort?: number;
}

function selector(flags: InstanceFlags): InstanceSelector {
  if (flags.cluster) {
    if (flags.port !== undefined) throw new InvalidArgumentError('use --base-port with --cluster');
    return { topology: 'cluster', port: flags.basePort ?? DEFAULT_CLUSTER_BASE_PORT };
  }
  if (flags.basePort !== undefined) throw new InvalidArgumentError('--base-port needs --cluster');
  return { topology: 'standalone', port: flags.port ?? DEFAULT_STANDALONE_PORT };
}

const log: Logger = {
  info: (message) => console.log(message),
  warn: (message) => console.error(`warning: ${message}`),
};

function withInstanceFlags(cmd: Command): Command {
  return cmd
    .option('--cluster', 'a 6-node cluster (3 primaries, 3 replicas) instead of one server')
    .option('--port <n>', `standalone port (default ${DEFAULT_STANDALONE_PORT})`, parsePort)
    .option(
      '--base-port <n>',
      `first cluster port; nodes use base..base+5 (default ${DEFAULT_CLUSTER_BASE_PORT})`,
      parsePort,
    );
}

export function registerValkey(program: Command): void {
  const valkey = program
    .command('valkey')
    .description(
      'run an embedded Valkey (standalone or cluster) without Docker: a development convenience of a repository checkout (installed, point --valkey-nodes at your own Valkey)',
    );

  withInstanceFlags(valkey.command('start'))
    .description('start Valkey bound to 127.0.0.1, persistence off (idempotent)')
    .action(async (flags: InstanceFlags) => {
      await startInstance(selector(flags), log);
    });

  withInstanceFlags(valkey.command('stop'))
    .option('--all', 'stop every instance recorded in the run directory')
    .description('stop the processes that start launched, by PID, and wait until they exit')
    .action(async (flags: InstanceFlags & { all?: boolean }) => {
      if (flags.all) await stopAll(log);
      else await stopInstance(selector(flags), log);
    });

  valkey
    .command('create-cluster')
    .description(
      'form a cluster (3 primaries, 3 replicas) from six running cluster-enabled nodes, ' +
        'as start --cluster does (idempotent)',
    )
    .requiredOption(
      '--nodes <list>',
      'the six nodes, comma-separated host:port; the first three become the primaries',
      nodeList,
    )
    .option('--timeout-ms <n>', 'how long the cluster may take to converge', positiveInt, 30_000)
    .action(async (flags: { nodes: NodeAddress[]; timeoutMs: number }) => {
      const where = flags.nodes.map((n) => `${n.host}:${n.port}`).join(',');
      if (await isClusterFormed(flags.nodes)) {
        log.info(`cluster on ${where} is already formed`);
        return;
      }
      await formCluster(flags.nodes, flags.timeoutMs);
      log.info(`cluster formed on ${where}: 3 primaries, 3 replicas, all slots assigned`);
    });

  valkey
    .command('status')
    .description('show each running instance and its topology')
    .action(async () => {
      console.log(await statusReport());
    });
}
