import { z } from 'zod';
import { decodeJson } from '../util/data.js';

/** Far above any relay node (10 M points/s, 1 TB/s): anything larger is not a measurement. */
export const MAX_LEARNED_POINTS = 10_000_000;
export const MAX_LEARNED_BYTES_PER_SEC = 1e12;

export const LearnedBudgetSchema = z.object({
  points: z.number().int().min(1).max(MAX_LEARNED_POINTS),
  bytesPerSec: z.number().positive().max(MAX_LEARNED_BYTES_PER_SEC),
});

/** One pressure report of one relay node, as the feed publishes it. */
export const PressureReportSchema = z.object({
  node: z.string().min(1),
  /** The limit multiplier in [0, 1]. */
  m: z.number().min(0).max(1),
  /** Memory as a ratio of the target, and its prediction. */
  u: z.number().min(0),
  uhat: z.number().min(0),
  mode: z.enum(['normal', 'emergency']),
  /** Increases with every report of one feed process: a gateway drops what is not newer. */
  seq: z.number().int().min(0),
  /** When the feed sampled (ms since the epoch). */
  ts: z.number().int().min(0),
  law: z.string().min(1),
  /**
   * The write budget the feed learned of the node (pressure/budget): points per second for
   * the gateways (bytes per second over the points per byte lately admitted) and the bytes
   * per second it estimates the node drains. A malformed or absurd one is dropped on its own
   * (the report's m still counts, and the gateway keeps the last good budget).
   */
  budget: LearnedBudgetSchema.optional().catch(undefined),
});
export type PressureReport = z.infer<typeof PressureReportSchema>;

/** The channel every feed publishes on; gateways subscribe to it once. */
export const PRESSURE_CHANNEL = 'sluice:pressure';

/** One key per node; the hash tag keeps the key on one slot in a cluster. */
export function pressureKey(nodeId: string): string {
  return `sluice:pressure:{${nodeId}}`;
}

export function encodeReport(report: PressureReport): string {
  return JSON.stringify(report);
}

/** A report, or undefined for anything that is not one (ignored, never trusted). */
export function decodeReport(text: string | null): PressureReport | undefined {
  return decodeJson(PressureReportSchema, text);
}
