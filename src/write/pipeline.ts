/**
 * One write through the ordered checks (checks.ts), for either transport: the transport hands
 * over the event and who sent it, and carries the outcome out (an OK, an HTTP answer, a
 * forward with its ticket). Nothing here knows which transport it serves.
 */
import type { GatewayConfig } from '../config/schema.js';
import type { Identity } from '../quota/policy.js';
import { pubkeyIdentity, resolveIdentity } from '../quota/policy.js';
import { retryInSec } from '../nostr/refusals.js';
import { retryAfterSec } from '../quota/responses.js';
import { ChargePlan } from './charge-plan.js';
import { WRITE_CHECKS } from './checks.js';
import { WriteTicket } from './ticket.js';
import type { AuthorMode } from './ticket.js';
import type { WriteOutcome, WriteRequest, WriteServices, WriteState } from './write-state.js';

/** How authors are charged under this configuration (see SessionSettings.author). */
export function authorMode(config: GatewayConfig): AuthorMode {
  const { quotas, identity, nostr } = config;
  if (!quotas.enabled || !identity.order.includes('pubkey')) return 'off';
  return nostr.verify === 'relay' ? 'relay' : 'gateway';
}

/** The identity charged for everything a client sends: its API key, else its address. */
export function senderIdentity(
  config: GatewayConfig,
  policy: WriteServices['policy'],
  facts: { ip: string; apiKey?: string | undefined },
): Identity {
  const { order, keySalt } = config.identity;
  const senderOrder = order.filter((s) => s !== 'pubkey' && s !== 'auth');
  return resolveIdentity(facts, senderOrder, policy, keySalt);
}

/**
 * The identities charged for each write and read of a sender, in charge order: its API key or
 * address, and the pubkey it authenticated as (`auth` in identity.order), which adds a charge
 * and never replaces the address's (a key costs nothing to mint), unless its tier lifts the
 * address (chargeAddress false: the operator listed the key, and the gateway checked its AUTH).
 */
export function senderIdentities(
  config: GatewayConfig,
  policy: WriteServices['policy'],
  base: Identity,
  authPubkey: string | undefined,
): Identity[] {
  const { order, keySalt } = config.identity;
  if (authPubkey === undefined || !order.includes('auth')) return [base];
  const auth = pubkeyIdentity('auth', authPubkey, policy, keySalt);
  return base.source === 'ip' && policy.liftsAddress(authPubkey) ? [auth] : [base, auth];
}

/**
 * The identities charged for each write of a sender: its senders (senderIdentities), and when
 * the first is its address, the ranges holding that address (quotas.ranges) right after it, so
 * that every range is paid in the same all-or-none fee as the address (charge-plan.ts). Reads
 * are not charged to ranges; nor is an API key's sender, nor an address a pubkey tier lifts.
 */
export function writeSenders(
  config: GatewayConfig,
  policy: WriteServices['policy'],
  senders: Identity[],
): Identity[] {
  const address = senders[0];
  if (address?.source !== 'ip') return senders;
  const ranges = policy.rangeIdentities(address.raw, config.identity.keySalt);
  return ranges.length === 0 ? senders : [address, ...ranges, ...senders.slice(1)];
}

export async function runWrite(services: WriteServices, req: WriteRequest): Promise<WriteOutcome> {
  const w = writeState(services, req);
  let forwarded = false;
  try {
    for (const check of WRITE_CHECKS) {
      // Most checks pass most writes by synchronously: no promise, no turn, for those.
      const result = check(w);
      const outcome = result instanceof Promise ? await result : result;
      if (outcome) return noted(services, req, outcome);
    }
    services.forwarded(w.nodeId, w.bytes, w.cost);
    const ticket = ticketOf(w);
    forwarded = ticket !== undefined;
    return { type: 'forward', plan: w.plan, ticket };
  } finally {
    // The charge is counted (or given back) by now: what was reserved for it is not held.
    if (w.reserved > 0) services.headroom.release(w.author.key, w.reserved);
    // Its id stays awaited while a ticket awaits the relay's answer (ticket.ts lets it go).
    if (w.awaits && !forwarded) services.seen.settled(w.event);
  }
}

/** A refusal by quota names a retry time: the same write sent again before it is early. */
function noted(services: WriteServices, req: WriteRequest, outcome: WriteOutcome): WriteOutcome {
  if (outcome.type !== 'refused' || outcome.kind !== 'quota') return outcome;
  const { decision } = outcome;
  if (decision && decision.outcome !== 'error' && retryInSec(outcome.message) !== undefined) {
    services.earlyRetries.refused(req.ip, req.event.id, retryAfterSec(decision), decision);
  }
  return outcome;
}

/** Built field by field, every field always set: one shape for every write (no spread). */
function writeState(services: WriteServices, req: WriteRequest): WriteState {
  const config = services.config();
  const policy = services.policy.pin();
  const sender = senderIdentity(config, policy, req);
  const mode = req.session?.settings.author ?? authorMode(config);
  return {
    event: req.event,
    bytes: req.bytes,
    ip: req.ip,
    apiKey: req.apiKey,
    nodeId: req.nodeId,
    session: req.session,
    services,
    config,
    policy,
    nowSec: Math.floor(services.now() / 1000),
    mode,
    path: 'off',
    cost: 0,
    reserved: 0,
    awaits: false,
    forged: false,
    hashed: false,
    sender,
    senders: writeSenders(
      config,
      policy,
      senderIdentities(config, policy, sender, req.session?.authPubkey),
    ),
    // With authors not charged (quotas off) no check reads it: not made.
    author:
      mode === 'off'
        ? sender
        : pubkeyIdentity('pubkey', req.event.pubkey, policy, config.identity.keySalt),
    plan: new ChargePlan(services.charger, {
      ip: req.ip,
      nodeId: req.nodeId,
      cost: 0,
      budgetPayer: sender,
      policy,
    }),
    feeRefused: undefined,
  };
}

/** What the relay's answer settles: nothing when authors are not charged. */
function ticketOf(w: WriteState): WriteTicket | undefined {
  if (w.mode === 'off') return undefined;
  const hashed = w.path === 'hashed';
  return new WriteTicket(w.services.settle, w.plan, {
    event: w.event,
    mode: w.mode,
    author: w.author,
    unverified: hashed,
    lifted: w.path === 'lifted' ? w.sender : undefined,
    kept: w.mode === 'relay' || hashed ? w.event : undefined,
    policy: w.policy,
  });
}
