#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerBench } from './cli/bench.js';
import { registerConfig } from './cli/config.js';
import { registerRelay } from './cli/relay.js';
import { registerFeed } from './cli/feed.js';
import { registerGateway } from './cli/gateway.js';
import { registerValkey } from './cli/valkey.js';
import { operatorMessage } from './cli/operator-errors.js';

const program = new Command()
  .name('sluice')
  .description('Adaptive write-quota gateway for relay nodes, with shared quotas in Valkey')
  .showHelpAfterError()
  .exitOverride();

registerValkey(program);
registerBench(program);
registerRelay(program);
registerGateway(program);
registerFeed(program);
registerConfig(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  console.error(`sluice: ${operatorMessage(err)}`);
  process.exit(1);
}
