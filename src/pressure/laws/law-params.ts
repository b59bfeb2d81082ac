import { z } from 'zod';
import { decodeJson } from '../../util/data.js';
import { LAWS, LAW_NAMES, paramsOf } from './registry.js';

/** Where the admin endpoint leaves parameter changes for a node's feed (no lease: they stay). */
export function lawParamsKey(nodeId: string): string {
  return `sluice:pressure:params:{${nodeId}}`;
}

const KNOWN = new Set(LAW_NAMES.flatMap((name) => [...paramsOf(name)]));

/** Overrides of either law's parameters: known names, finite numbers. */
export const LawParamsSchema = z
  .record(z.string(), z.number().refine(Number.isFinite, 'must be a finite number'))
  .superRefine((params, ctx) => {
    for (const key of Object.keys(params)) {
      if (!KNOWN.has(key))
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: 'not a parameter of any control law',
        });
    }
  });
export type LawParams = z.infer<typeof LawParamsSchema>;

/** Parameters read back from Valkey, or undefined when absent or not valid. */
export function decodeLawParams(text: string | null): LawParams | undefined {
  return decodeJson(LawParamsSchema, text);
}

/**
 * Why no law would take these parameters, or undefined when at least one does. Checked
 * before they are saved, so a feed is never handed a combination its law refuses.
 */
export function lawParamsProblem(params: LawParams): string | undefined {
  const problems: string[] = [];
  for (const name of LAW_NAMES) {
    const own = paramsOf(name);
    // A law that does not know a parameter would ignore it: that is not acceptance.
    const foreign = Object.keys(params).filter((k) => !own.has(k));
    if (foreign.length > 0) {
      problems.push(`${name}: does not take ${foreign.join(', ')}`);
      continue;
    }
    try {
      LAWS[name].make(params);
      return undefined;
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
    }
  }
  return problems.join('; ');
}
