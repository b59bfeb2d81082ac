import { z } from 'zod';
import { decodeJson } from '../util/data.js';

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
