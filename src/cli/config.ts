import { writeFileSync } from 'node:fs';
import type { Command } from 'commander';

export function registerConfig(program: Command): void {
  const config = program
    .command('config')
    .description('check a configuration file, or print the configuration reference');
  config
    .command('check')
    .description(
      'validate FILE (with the SLUICE_* environment) and print the effective configuration, secrets masked',
    )
    .argument('<file>', 'configuration file (YAML or JSON)')
    .action(async (file: string) => {
      const { loadGatewayConfig } = await import('../config/load.js');
      const { defaultSaltWarning, maskSecrets } = await import('../config/secrets.js');
      const { stringify } = await import('yaml');
      // Throws a ConfigError naming every problem; cli.ts prints it and exits 1.
      const effective = loadGatewayConfig({ file, env: process.env });
      const { loadPubkeyTiers } = await import('../quota/pubkey-tiers.js');
      const listed = loadPubkeyTiers(effective.identity.pubkeyTiers).size;
      const warning = defaultSaltWarning(effective);
      const lines = [
        `# ${file}: valid. Effective configuration (file, then environment), secrets masked:`,
        ...(warning ? [`# warning: ${warning}`] : []),
        ...(listed > 0 ? [`# identity.pubkeyTiers: ${listed} pubkeys listed`] : []),
        stringify(maskSecrets(effective)).trimEnd(),
      ];
      console.log(lines.join('\n'));
    });
  config
    .command('reference')
    .description(
      'print the configuration reference (docs/CONFIGURATION.md) generated from the schema',
    )
    .option('-o, --output <file>', 'write it to this file instead of standard output')
    .action(async (flags: { output?: string }) => {
      const { configurationReference } = await import('../config/reference.js');
      const text = configurationReference();
      if (flags.output) writeFileSync(flags.output, text);
      else process.stdout.write(text);
    });
}
