/**
 * Turns SIGTERM and SIGINT into an ordinary exit for a test file. The test runner ends a file
 * that overruns --test-timeout with SIGTERM, and a signal's default action skips the 'exit'
 * handlers that kill the relays, gateways and scripts the file started: without this they
 * would outlive it and load every file after it. Imported for its effect.
 */
import { constants } from 'node:os';

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => process.exit(128 + constants.signals[signal]));
}
