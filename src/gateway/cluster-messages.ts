/** What the gateway's cluster primary and its workers say to each other over IPC. */
import os from 'node:os';
import type { GatewayConfig } from '../config/schema.js';
import type { AdminRequest, AdminResponse } from './server.js';

export type ToWorker =
  | { type: 'sluice:reload' }
  | { type: 'sluice:admin'; id: number; request: AdminRequest }
  /** Sent with a client's socket; `head` (base64) is what the primary read from it first. */
  | { type: 'sluice:connection'; head?: string };

export type ToPrimary =
  { type: 'sluice:ready' } | { type: 'sluice:admin-response'; id: number; response: AdminResponse };

/** Workers to run: `auto` is one per core the process may use. */
export function workerCount(setting: GatewayConfig['workers']): number {
  return setting === 'auto' ? os.availableParallelism() : setting;
}

export function isMessage<T extends { type: string }>(value: unknown, type: T['type']): value is T {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === type;
}
