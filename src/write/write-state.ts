/**
 * What the checks of one write read and fill in: the request as its transport gave it (the
 * event, who sent it, one configuration snapshot and one clock reading), the services they
 * call, and what the earlier checks found. Types only.
 */
import type { Maybe } from '../util/maybe.js';
import type { Event } from 'nostr-tools/pure';
import type { GatewayConfig, Limit } from '../config/schema.js';
import type { EventPolicy } from '../nostr/event-policy.js';
import type { NostrSession } from '../nostr/session.js';
import type { QuotaDecision } from '../quota/decider.js';
import type { Charger } from '../quota/charger.js';
import type { Headroom } from '../quota/headroom.js';
import type { Identity, Policy } from '../quota/policy.js';
import type { WindowCounters } from '../util/window-counters.js';
import type { ChargePlan, PlanRefusal } from './charge-plan.js';
import type { EarlyRetries } from './early-retries.js';
import type { SeenIds } from './seen-ids.js';
import type { AuthorMode, SettleServices, WriteTicket } from './ticket.js';

/** One write as a transport hands it over: the event, its sender, and nothing else. */
export interface WriteRequest {
  event: Event;
  /** The size of the message it came in (a frame, a body): the cost's size part. */
  bytes: number;
  ip: string;
  apiKey?: string | undefined;
  nodeId: string;
  /** A WebSocket's protocol state (its AUTH pubkey, events awaited); none over HTTP. */
  session?: NostrSession | undefined;
}

/** What the checks use: built once per gateway, read-only to them. */
export interface WriteServices {
  /** The configuration in force: read once per write (a reload swaps it, never mutates it). */
  config: () => GatewayConfig;
  policy: Policy;
  charger: Charger;
  seen: SeenIds;
  headroom: Headroom;
  /** Writes refused with a retry time, and those sent again before it. */
  earlyRetries: EarlyRetries;
  /** Events per address verified before charging it (a lift) that failed, per minute. */
  failedChecks: WindowCounters;
  eventPolicy: EventPolicy;
  verify: (event: Event) => boolean;
  hashMatches: (event: Event) => boolean;
  settle: SettleServices;
  /** Frames counted by type (BLOCKED, POW, DUPLICATE, ...). */
  countFrame: (type: string) => void;
  /** The node's limit multiplier now, in [0, 1] (the pressure feed's). */
  multiplier: (nodeId: string) => number;
  /** A write on its way to the node (the pressure feed's admitted tally). */
  forwarded: (nodeId: string, bytes: number, cost: number) => void;
  now: () => number;
}

/** Which way a write goes through the checks: chosen once, by `route`. */
export type WritePath = 'lifted' | 'hashed' | 'verified' | 'relay' | 'off';

export interface WriteState extends WriteRequest {
  services: WriteServices;
  /** The configuration and the policy as they were when the write began (one snapshot). */
  config: GatewayConfig;
  policy: Policy;
  nowSec: number;
  mode: AuthorMode;
  path: WritePath;
  cost: number;
  /** The id is not the hash of the content (found while judging work). */
  forged: boolean;
  /** The id was hashed already and matches. */
  hashed: boolean;
  /** The senders' identities (address or API key, an AUTH pubkey) and the first of them. */
  senders: Identity[];
  sender: Identity;
  /** The event's author (under `off`, where no check reads it, the sender stands in). */
  author: Identity;
  plan: ChargePlan;
  /** Points reserved in the author's headroom while the checks run (the hashed path). */
  reserved: number;
  /** Its id marked awaited here by acceptedHere (see SeenIds.begin). */
  awaits: boolean;
  /** The fee's refusal, when it was refused and the write may still be found forged. */
  feeRefused: PlanRefusal | undefined;
}

/** How a write ends. */
export type WriteOutcome =
  | {
      type: 'forward';
      /** Absent when the relay's answer settles nothing (authors not charged). */
      ticket?: WriteTicket;
      plan: ChargePlan;
    }
  | { type: 'duplicate'; plan: ChargePlan }
  | {
      type: 'refused';
      /** The NIP-01 message: machine-readable prefix, then why. */
      message: string;
      kind: 'invalid' | 'blocked' | 'auth' | 'held' | 'quota' | 'early' | 'costly';
      /** The quota decision that refused (kind quota). */
      decision?: QuotaDecision;
      by?: PlanRefusal['by'];
      /** A forgery: counts against the connection that sent it. */
      counts?: boolean;
      /** A write costlier than a whole quota it pays (kind costly): that quota's limit. */
      over?: Limit;
      /** An early retry: how long to hold the answer, and whether its connection closes. */
      early?: { holdMs: number; retrySec: number; closes: boolean };
      plan?: ChargePlan;
    };

/** A check: undefined to go on, or how the write ends. */
export type WriteCheck = (w: WriteState) => Maybe<WriteOutcome | undefined>;
