/** nostr.trust: a tier for the pubkeys the relay's own follow graph reaches (docs/NOSTR.md). */
import { z } from 'zod';
import { pubkeyOfLine } from '../quota/pubkey-tiers.js';

const positiveInt = z.number().int().positive();

const SeedPubkey = z.string().transform((value, ctx) => {
  const found = pubkeyOfLine(value.trim());
  if ('hex' in found) return found.hex;
  ctx.addIssue({ code: 'custom', message: `${found.problem} (got "${value.slice(0, 80)}")` });
  return z.NEVER;
});

export const TrustSettingsSchema = z
  .strictObject({
    tier: z
      .string()
      .min(1)
      .describe(
        'The tier (of quotas.tiers) of the pubkeys within hops of the seeds; a key listed in ' +
          'identity.pubkeyTiers keeps its listed tier',
      ),
    seeds: z
      .array(SeedPubkey)
      .min(1)
      .max(10_000)
      .describe('The pubkeys the walk starts from (hex or npub); they are in the tier themselves'),
    relay: z
      .url({ protocol: /^wss?$/ })
      .optional()
      .describe(
        'The relay the follow lists (kind 3) are read from over REQ; default: the first ' +
          "upstream's URL as ws://",
      ),
    hops: z
      .number()
      .int()
      .min(0)
      .max(4)
      .default(2)
      .describe('Follow hops from the seeds (1: whom the seeds follow; 2: and whom they follow)'),
    refreshSec: positiveInt
      .default(600)
      .describe('Seconds between the end of one refresh and the start of the next'),
    timeoutSec: positiveInt
      .default(120)
      .describe('A refresh not done in this time is abandoned; the set in force stays'),
    maxPubkeys: positiveInt
      .max(10_000_000)
      .default(1_000_000)
      .describe('Pubkeys in the set at most (32 bytes each once built); the walk stops adding'),
    maxFollowsPerList: positiveInt
      .default(5000)
      .describe("p-tags read of one follow list (in the list's order); the rest are dropped"),
    authorsPerReq: positiveInt
      .max(1000)
      .default(100)
      .describe('Authors in one REQ, and its limit (events kept of one answer)'),
    maxEventBytes: positiveInt
      .min(1024)
      .default(1024 * 1024)
      .describe(
        'The largest frame read from the relay; a follow list over it is left out of the walk',
      ),
    verifySignatures: z
      .boolean()
      .default(true)
      .describe(
        "Check each follow list's signature in the gateway (false: trust the relay, which verified it on write)",
      ),
  })
  .describe(
    "A tier from the relay's own follow graph: pubkeys within hops of the seeds, read over " +
      'REQ and refreshed every refreshSec (docs/NOSTR.md)',
  );
