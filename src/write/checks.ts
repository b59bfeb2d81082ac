/**
 * The checks of one write, in the order they run (after khatru's lists of small rejecters):
 * the same list for a WebSocket EVENT and an event POSTed over HTTP. Cheapest first, and work
 * is charged before it is done. `route` picks the write's path once; each later check names
 * the paths it serves and passes the others by.
 *
 * - lifted: its author's tier lifts the address (chargeAddress false): verified first, the
 *   address pays only for a forgery or a replay.
 * - hashed: its author had room to spare at its last charge, or is unknown here (one write at
 *   a time): charged on the event's hash, with its senders in one turn; the relay verifies it
 *   (its refusal gives the charge back).
 * - verified: the signature is checked before its author is charged; a replay is answered.
 * - relay: (nostr.verify relay) its author is charged on the relay's answer.
 * - off: authors are not charged; the senders pay.
 */
import type { Limit } from '../config/schema.js';
import { requiredDifficulty } from '../nostr/adaptive-work.js';
import { workDone } from '../nostr/pow.js';
import {
  adaptiveWorkRefusal,
  earlyRetryRefusal,
  retrySec,
  AUTH_REQUIRED_REFUSAL,
  costsMoreThanQuota,
  ID_REFUSAL,
  IN_FLIGHT_DUPLICATE,
  SIGNATURE_REFUSAL,
} from '../nostr/refusals.js';
import { nostrRejection } from '../quota/responses.js';
import type { QuotaDecision } from '../quota/decider.js';
import { after } from '../util/maybe.js';
import type { PlanRefusal } from './charge-plan.js';
import { LIFT_AHEAD_SEC } from './seen-ids.js';
import type { WriteCheck, WriteOutcome, WritePath, WriteState } from './write-state.js';

/** The window of failed verifications per address that ends the lift (see `liftable`). */
export const FAILED_CHECKS_WINDOW_MS = 60_000;

function on(w: WriteState, ...paths: WritePath[]): boolean {
  return paths.includes(w.path);
}

/**
 * A refusal by quota, worded by quota (responses.ts), naming the time after which the same
 * write can pass as far as this process knows: the longest wait of every counter it is known
 * to wait for (ChargePlan.longestWait, and its author when not charged yet: `authorShort`).
 */
export function quotaRefusal(refused: PlanRefusal, w: WriteState): WriteOutcome {
  const r = w.plan.longestWait(refused, authorShort(w, refused));
  const { decision, by } = r;
  return {
    type: 'refused',
    kind: 'quota',
    message: neverFits(w, decision)
      ? costsMoreThanQuota(w.cost, decision.limit, decision.windowSec)
      : nostrRejection(decision, by === 'sender' && authWouldLift(w) ? AUTH_LIFTS : undefined),
    decision,
    by,
    plan: w.plan,
  };
}

const AUTH_LIFTS = 'AUTH (NIP-42) as a listed pubkey';

/**
 * The author's quota when the write's refusal came before its author was charged (its senders
 * refused first), if this process knows it too short for the write: over its limit in memory
 * (an in-memory block), or with less than the cost left at its last charge here (Headroom).
 * Unknown otherwise (never charged through this process, or its window over): a retry at the
 * time given may then meet the author's refusal, naming its own time.
 */
function authorShort(w: WriteState, refused: PlanRefusal): PlanRefusal[] {
  if (w.mode !== 'gateway' || w.cost === 0 || w.plan.taken.some((t) => t.by === 'author')) {
    return [];
  }
  const { author, nodeId, policy, services } = w;
  const blocked = services.charger.knownOverLimit({
    identity: author,
    cls: 'write',
    nodeId,
    policy,
  });
  if (blocked) return [{ by: 'author', decision: blocked }];
  const short = services.headroom.short(author.key, w.cost);
  const windowSec = policy.limitOf(author.tier, 'write')?.windowSec;
  if (!short || windowSec === undefined) return [];
  const resetSec = Math.ceil((short.until - services.now()) / 1000);
  const decision: QuotaDecision = {
    ...refused.decision,
    outcome: 'limited',
    admitted: false,
    policy: 'writes',
    limit: short.limit,
    windowSec,
    remaining: short.remaining,
    resetSec,
    fromMemory: true,
    receipt: undefined,
  };
  return [{ by: 'author', decision }];
}

/**
 * A write that costs more than a whole window of its quota at full strength: no retry time
 * exists, and saying one would send the client back for nothing.
 */
function neverFits(w: WriteState, d: PlanRefusal['decision']): boolean {
  return d.outcome !== 'error' && d.policy === 'writes' && d.multiplier >= 1 && w.cost > d.limit;
}

/**
 * Whether AUTH would lift this sender's refusal: a WebSocket not bound yet, charged as its
 * address, where the auth identity is followed and a tier with listed pubkeys lifts the address.
 */
function authWouldLift(w: WriteState): boolean {
  const { identity, quotas, nostr } = w.config;
  if (!w.session || w.session.authPubkey !== undefined || w.sender.source !== 'ip') return false;
  if (nostr.publicUrl === undefined || !identity.order.includes('auth')) return false;
  return Object.keys(identity.pubkeyTiers).some(
    (tier) => quotas.tiers[tier]?.chargeAddress === false,
  );
}

/** An event whose id or signature is false: counted, and against its connection. */
function invalid(w: WriteState, message: string): WriteOutcome {
  w.services.countFrame('INVALID_SIGNATURE');
  return {
    type: 'refused',
    kind: 'invalid',
    message,
    counts: true,
    plan: w.plan,
  };
}

function duplicate(w: WriteState): WriteOutcome {
  w.services.countFrame('DUPLICATE');
  return { type: 'duplicate', plan: w.plan };
}

/**
 * The same write from the same address again before the retry time its refusal gave: answered
 * from memory, unjudged (no Valkey, no signature); from its second early copy on, after a hold
 * the transport keeps (limits.earlyRetries.holdMs, at most until its time); past max in a
 * window, its connection closes. An honest client that waits the time it was given is never
 * here; one that resends its pending events once on reconnect is answered at once.
 */
export const earlyRetry: WriteCheck = (w) => {
  const { holdMs, max, windowSec } = w.config.limits.earlyRetries;
  const early = w.services.earlyRetries.early(w.ip, w.event.id, windowSec * 1000);
  if (!early) return undefined;
  w.services.countFrame('EARLY_RETRY');
  const sec = retrySec(early.waitMs);
  return {
    type: 'refused',
    kind: 'early',
    message: earlyRetryRefusal(sec),
    decision: early.decision,
    early: {
      holdMs: early.repeated ? Math.min(holdMs, early.waitMs) : 0,
      retrySec: sec,
      closes: early.count > max,
    },
  };
};

/** Kinds (nostr.blockedKinds), proof of work (nostr.pow), and the write's cost. */
export const eventPolicy: WriteCheck = (w) => {
  const judged = w.services.eventPolicy.judge(w.event, w.bytes);
  if (judged.refused !== undefined) {
    w.services.countFrame(judged.metric);
    return { type: 'refused', kind: 'blocked', message: judged.refused };
  }
  w.cost = judged.cost;
  w.plan.where.cost = judged.cost;
  w.forged = judged.forged;
  w.hashed = judged.hashed;
  return undefined;
};

/** nostr.authRequiredForWrites: a connection bound by NIP-42 AUTH (HTTP never is). */
export const authRequired: WriteCheck = (w) => {
  if (!w.config.nostr.authRequiredForWrites || w.session?.authPubkey !== undefined) return;
  w.services.countFrame('AUTH_REQUIRED');
  return {
    type: 'refused',
    kind: 'auth',
    message: AUTH_REQUIRED_REFUSAL,
  };
};

/**
 * nostr.pow.adaptive: while the node's multiplier is below 1, an event of a non-member must
 * carry the difficulty in force (adaptive-work.ts). Judged on the id as claimed: a forged id
 * claiming work is refused later, as every forgery is (the signature, or the relay's answer).
 */
export const adaptiveWork: WriteCheck = (w) => {
  const { pow } = w.config.nostr;
  // An exempt kind (NIP-46 signing) is never limited by default, under load or not.
  if (!pow.adaptive.enabled || w.services.eventPolicy.exempt(w.event.kind)) return undefined;
  const m = w.services.multiplier(w.nodeId);
  const required = requiredDifficulty(m, pow.minDifficulty, pow.adaptive);
  if (required <= pow.minDifficulty || isMember(w)) return undefined;
  const work = workDone(w.event.id, w.event.tags);
  if (work >= required) return undefined;
  w.services.countFrame('POW');
  return {
    type: 'refused',
    kind: 'blocked',
    message: adaptiveWorkRefusal(required, work),
  };
};

/**
 * A member is never asked for adaptive work: its author's pubkey, its AUTH pubkey or its API
 * key holds a tier. A bare AUTH is no membership: a key costs nothing to mint.
 */
function isMember(w: WriteState): boolean {
  const { policy } = w;
  if (policy.tierOfPubkey(w.event.pubkey) !== undefined) return true;
  const auth = w.session?.authPubkey;
  if (auth !== undefined && policy.tierOfPubkey(auth) !== undefined) return true;
  return w.apiKey !== undefined && policy.tierOfApiKey(w.apiKey) !== undefined;
}

/** The connection's own bounds: the same id awaited already, too much awaited. */
export const heldOnConnection: WriteCheck = (w) => {
  const held = w.session?.eventRefusal(w.event.id, w.bytes);
  return held === undefined ? undefined : { type: 'refused', kind: 'held', message: held };
};

/** Which path the write takes (see the module's comment): decided before anything is charged. */
export const route: WriteCheck = (w) => {
  if (w.mode !== 'off' && liftable(w)) w.path = 'lifted';
  else if (w.mode === 'gateway' && idMatches(w) && onHash(w)) w.path = 'hashed';
  else w.path = w.mode === 'gateway' ? 'verified' : w.mode;
  return undefined;
};

/**
 * Whether the id is the content's hash; a match is remembered (w.hashed), so no later check
 * hashes it again. A mismatch is left to the checks that refuse it (idMatchesContent, signature).
 */
function idMatches(w: WriteState): boolean {
  if (w.hashed) return !w.forged;
  w.hashed = w.services.hashMatches(w.event);
  return w.hashed;
}

/**
 * nostr.verify auto, and the author had room to spare at its last charge, counting what
 * concurrent writes judged on the hash reserved, or is unknown here with no other write on
 * the hash (Headroom.reserve): this one reserves its cost now, before it awaits anything
 * (runWrite gives it up when the checks end).
 */
function onHash(w: WriteState): boolean {
  if (w.config.nostr.verify !== 'auto') return false;
  // A write that costs nothing (an exempt kind) decides nothing here: the relay verifies it.
  if (w.cost === 0) return true;
  if (!w.services.headroom.reserve(w.author.key, w.cost)) return false;
  w.reserved = w.cost;
  return true;
}

/**
 * Whether the address may be spared: the pubkey is in a tier with chargeAddress false; the
 * event is dated within its author's write window (at most LIFT_AHEAD_SEC ahead), so a replay
 * meets the claim its first acceptance left; the sender is the address (an API key pays as
 * ever); and fewer than nostr.maxInvalidEvents lifted events from this address failed
 * verification this minute (past that, its events pay the address first: verifying is work).
 */
function liftable(w: WriteState): boolean {
  const { policy } = w;
  if (!policy.liftsAddress(w.event.pubkey)) return false;
  const windowSec = policy.limitOf(w.author.tier, 'write')?.windowSec ?? 0;
  const age = w.nowSec - w.event.created_at;
  return (
    age <= windowSec &&
    age >= -LIFT_AHEAD_SEC &&
    w.sender.source === 'ip' &&
    w.services.failedChecks.peek(w.ip) < w.config.nostr.maxInvalidEvents
  );
}

/**
 * A write whose cost is more than the whole quota of one it would be charged to (a sender, a
 * range, its author when authors are charged here): no wait lets it pass, so it is refused
 * saying so, before anything is charged or verified (as a blocked kind is).
 */
export const costFits: WriteCheck = (w) => {
  // Every write passes here: no array is built for it. A lifted write's address pays nothing.
  const lifted = on(w, 'lifted');
  for (const sender of w.senders) {
    if (lifted && sender.source === 'ip') continue;
    const over = w.policy.quotaBelow(sender, 'write', w.cost, w.ip);
    if (over) return costly(w, over);
  }
  const over = w.mode === 'gateway' && w.policy.quotaBelow(w.author, 'write', w.cost, w.ip);
  return over ? costly(w, over) : undefined;
};

function costly(w: WriteState, over: Limit): WriteOutcome {
  w.services.countFrame('COSTS_MORE_THAN_QUOTA');
  return {
    type: 'refused',
    kind: 'costly',
    message: costsMoreThanQuota(w.cost, over.points, over.windowSec),
    over,
  };
}

/** lifted: the signature first; a failure is counted, and paid by the senders after all. */
export const liftedSignature: WriteCheck = (w) => {
  if (!on(w, 'lifted') || (!w.forged && w.services.verify(w.event))) return undefined;
  w.services.failedChecks.consume(w.ip, 1, FAILED_CHECKS_WINDOW_MS);
  return after(w.plan.payFee(w.senders), () => invalid(w, SIGNATURE_REFUSAL));
};

/**
 * hashed: a replay of what a relay accepted through this process, answered from memory (on
 * the verified path the signature is checked first: see `replay`). hashed or verified: a copy
 * of a write forwarded through this process whose answer is awaited (a replay sent at once
 * from another connection: the same id and signature, so a forgery of the id cannot hold back
 * the genuine event), answered without charging its author. The senders pay either way.
 */
export const acceptedHere: WriteCheck = (w) => {
  if (!on(w, 'hashed', 'verified')) return undefined;
  const { seen } = w.services;
  // The hashed path matched the id to the content already; a verified one is matched here
  // (a copy with another content under the same id and signature is a forgery, not a copy).
  if (on(w, 'verified') && !idMatches(w)) return undefined;
  const accepted = on(w, 'hashed') && seen.here(w.event.id);
  if (!accepted && !seen.inFlight(w.event)) {
    // Awaited from now (before this write awaits anything): runWrite lets it go unless the
    // write is forwarded, whose ticket does when the relay answers.
    seen.begin(w.event);
    w.awaits = true;
    return undefined;
  }
  return after(w.plan.payFee(w.senders), (refused) => {
    if (refused) return quotaRefusal(refused, w);
    if (accepted) return duplicate(w);
    w.services.countFrame('DUPLICATE');
    return {
      type: 'refused',
      kind: 'held',
      message: IN_FLIGHT_DUPLICATE,
    } satisfies WriteOutcome;
  });
};

/** The senders pay before the gateway verifies (a forgery's refusal still says invalid). */
export const senderFee: WriteCheck = (w) => {
  if (!on(w, 'verified', 'relay', 'off')) return undefined;
  return after(w.plan.payFee(w.senders), (refused) => {
    if (!refused) return undefined;
    if (!w.forged) return quotaRefusal(refused, w);
    w.feeRefused = refused;
    return undefined;
  });
};

/** An id that is not its content's hash; under relay, always hashed here (the OK proves it). */
export const idMatchesContent: WriteCheck = (w) => {
  if (!on(w, 'verified', 'relay', 'off')) return undefined;
  if (w.forged) return invalid(w, ID_REFUSAL);
  if (w.path === 'relay' && !w.hashed && !w.services.hashMatches(w.event)) {
    return invalid(w, ID_REFUSAL);
  }
  return undefined;
};

/**
 * An author this process knows is over its limit, refused before its signature is checked:
 * nothing of its can be stored this window (a replay is still answered duplicate:).
 */
export const knownOverLimit: WriteCheck = (w) => {
  const relayMode = w.mode === 'relay' && on(w, 'relay', 'lifted');
  if (!relayMode && !on(w, 'verified')) return undefined;
  const over = w.services.charger.knownOverLimit({
    identity: w.author,
    cls: 'write',
    nodeId: w.nodeId,
    policy: w.policy,
  });
  return over ? refusedFromMemory(w, over, relayMode) : undefined;
};

async function refusedFromMemory(w: WriteState, over: QuotaDecision, relayMode: boolean) {
  if (!relayMode && (await w.services.seen.anywhere(w.event.id)) === true) return duplicate(w);
  return quotaRefusal({ by: 'author', decision: over }, w);
}

/** verified (and off under nostr.verify always): the full NIP-01 check. */
export const signature: WriteCheck = (w) => {
  const checks = on(w, 'verified') || (on(w, 'off') && w.config.nostr.verify === 'always');
  if (!checks || w.services.verify(w.event)) return undefined;
  return invalid(w, SIGNATURE_REFUSAL);
};

/** A replay of an event some gateway saw stored: answered here, its author spared. */
export const replay: WriteCheck = (w) => {
  const lifted = on(w, 'lifted') && w.mode === 'gateway';
  if (!lifted && !on(w, 'verified')) return undefined;
  return replayOf(w, lifted);
};

async function replayOf(w: WriteState, lifted: boolean): Promise<WriteOutcome | undefined> {
  if ((await w.services.seen.anywhere(w.event.id)) !== true) return undefined;
  // A lifted replay was not paid for yet: its senders pay now.
  const refused = lifted ? await w.plan.payFee(w.senders) : undefined;
  return refused ? quotaRefusal(refused, w) : duplicate(w);
}

/** lifted: senders that are not the address (an AUTH pubkey) pay as ever. */
export const liftedFee: WriteCheck = (w) => {
  if (!on(w, 'lifted')) return undefined;
  return after(w.plan.payFee(w.senders.filter((s) => s.source !== 'ip')), (refused) =>
    refused ? quotaRefusal(refused, w) : undefined,
  );
};

/** The write's own charges, all or none: see charge-plan.ts. */
export const writeCharges: WriteCheck = (w) => {
  const { plan, author, services } = w;
  const chargesAuthor = w.mode === 'gateway' && on(w, 'verified', 'hashed', 'lifted');
  if (!chargesAuthor) {
    return after(plan.payBudget(), (refused) => (refused ? quotaRefusal(refused, w) : undefined));
  }
  const hashed = on(w, 'hashed');
  return after(plan.payWrite([author], hashed ? w.senders : []), (refused) => {
    // A free write shows nothing of its author's quota: nothing is learnt from it.
    if (!on(w, 'lifted') && w.cost > 0) {
      services.headroom.learn(author.key, plan.decisionOf(author));
    }
    if (!refused) return undefined;
    if (hashed && refused.by === 'author') return unpaidOnHash(w, refused);
    return quotaRefusal(refused, w);
  });
};

/**
 * hashed, and its author refused (the charge given back: charge-plan.ts): judged as a
 * verified one would be before the refusal stands. A forgery is refused invalid:, a replay of
 * a stored event answered duplicate:.
 */
async function unpaidOnHash(w: WriteState, refused: PlanRefusal): Promise<WriteOutcome> {
  if (!w.services.verify(w.event)) return invalid(w, SIGNATURE_REFUSAL);
  if ((await w.services.seen.anywhere(w.event.id)) === true) return duplicate(w);
  return quotaRefusal(refused, w);
}

/** Every write goes through these, in this order. */
export const WRITE_CHECKS: readonly WriteCheck[] = [
  earlyRetry,
  eventPolicy,
  authRequired,
  adaptiveWork,
  heldOnConnection,
  route,
  costFits,
  liftedSignature,
  acceptedHere,
  senderFee,
  idMatchesContent,
  knownOverLimit,
  signature,
  replay,
  liftedFee,
  writeCharges,
];
