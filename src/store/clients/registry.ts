/**
 * Every Valkey client sluice can use, in the report's order. Adding one is its driver in this
 * folder and a line here: the store, the CLI choices, the config schema, the benchmark's
 * implementations and plan, the run file's schema (and through it the report) and the tests'
 * client x topology matrix all read this table.
 */
import type { ClientDriver } from './driver.js';

export interface ClientEntry {
  /** Its npm package (benchmarks record its version). */
  package: string;
  /** Its name on the report's chart axes. */
  label: string;
  /** Whether the library enforces StoreOptions.inflightLimit (else it records null). */
  inflightLimit: boolean;
  /** Its driver, loaded on first use: naming a client (flags, schemas) loads no library. */
  load(): Promise<{ driver: ClientDriver }>;
}

export const CLIENTS = {
  'valkey-glide': {
    package: '@valkey/valkey-glide',
    label: 'glide',
    inflightLimit: true,
    load: () => import('./glide.js'),
  },
  iovalkey: {
    package: 'iovalkey',
    label: 'iovalkey',
    inflightLimit: false,
    load: () => import('./iovalkey.js'),
  },
  ioredis: {
    package: 'ioredis',
    label: 'ioredis',
    inflightLimit: false,
    load: () => import('./ioredis.js'),
  },
} as const satisfies Record<string, ClientEntry>;
