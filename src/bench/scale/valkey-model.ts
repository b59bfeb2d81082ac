/**
 * A Valkey Cluster on the virtual clock: primaries that each serve one command at a time
 * (a queue, an exponential service time), network hops drawn from a latency distribution,
 * a client timeout, a primary failover (a pause, then a replica that lost the writes of its
 * replication lag) and a slot migration (ASK while keys move, MOVED once the slot has). Each
 * gateway gets a Store of its own with the real lease store (src/store/lease.ts) over this
 * model's scripts and the real QuotaLimiter over rate-limiter-flexible's counter semantics,
 * so the decider runs unchanged. Counters live in one keyspace: a key is on one primary at
 * a time, and a migration moves it whole (MIGRATE is atomic and keeps the TTL).
 */
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { RateLimiterStoreAbstract } from 'rate-limiter-flexible';
import { StoreError } from '../../store/index.js';
import type { LimiterOptions, Store } from '../../store/index.js';
import { leaseStore } from '../../store/lease.js';
import { QuotaLimiter } from '../../store/limiter.js';
import { seededRandom } from '../../util/random.js';
import type { VirtualClock } from './clock.js';
import { legMs, serviceMs } from './latency.js';
import type { HopLatency } from './latency.js';
import { evenSlotOwners, keySlot } from './slots.js';

export interface FailoverSpec {
  /** The primary that fails (index). */
  shard: number;
  atMs: number;
  /** No primary serves its slots for this long (detection and promotion). */
  pauseMs: number;
  /** The replica had not received the writes of this last stretch: they are lost. */
  lostMs: number;
  /**
   * Not a failover but a CLIENT PAUSE of the primary: commands wait for its end and then
   * run (the client may have timed out), nothing is lost, no slot map changes.
   */
  clientPause?: boolean | undefined;
}

export interface MigrationSpec {
  /** Slots that move, and the primary they move to. */
  slots: readonly number[];
  to: number;
  atMs: number;
  /** Keys move one by one over this long (each at its own moment in it). */
  durationMs: number;
}

export interface ValkeyModelOptions {
  primaries: number;
  /** Commands one primary serves per second (one core; scripts cost more than GETs). */
  serviceRatePerSec: number;
  hop: HopLatency;
  /** A command not answered within this is failed by the client (StoreError). */
  timeoutMs: number;
  failover?: FailoverSpec | undefined;
  migration?: MigrationSpec | undefined;
  seed: number;
}

interface Counter {
  consumed: number;
  /** When the key expires (virtual ms). */
  endsAt: number;
}

/** A counter key's client part: what follows the last ':' (the hash tag). */
export function clientPartOf(key: string): string {
  return key.slice(key.lastIndexOf(':') + 1);
}

/** What the model tells the simulation about the keyspace. */
export interface KeyspaceListener {
  /** A counter was created: a window of the key starts (its client part). */
  windowStarted(client: string, startMs: number, endMs: number): void;
  /** A failover lost `points` of the key's counter (the replica had fewer). */
  lost(client: string, points: number, atMs: number): void;
}

/** A write being decided: a plain consume it sends records when Valkey counted it. */
export interface WriteTag {
  evalAt?: number;
}

interface Shard {
  busyUntil: number;
  commands: number;
  /** Commands of the hot key (a client part the simulation names). */
  hotCommands: number;
}

export class ValkeyModel {
  private readonly owners: Uint16Array;
  private readonly shards: Shard[];
  private readonly keys = new Map<string, Counter>();
  private readonly random: () => number;
  private readonly hopMean: number;
  private readonly svcMean: number;
  /** Mutations in the failing primary's last `lostMs` before the failover: undone at it. */
  private journal: { key: string; prev: Counter | undefined }[] = [];
  private failedOver = false;
  private migrated = false;
  /** Per gateway: slots it has learned moved (a MOVED told it), shards it re-resolved. */
  private readonly learned: Set<number>[] = [];
  private readonly refreshed: Set<number>[] = [];
  /** The write whose decide() is running synchronously now (set by the simulation). */
  tag: WriteTag | undefined;
  /** Commands redirected (ASK, MOVED) and failed by the client's timeout. */
  redirects = 0;
  timeouts = 0;
  lostPoints = 0;

  constructor(
    private readonly clock: VirtualClock,
    private readonly opts: ValkeyModelOptions,
    private readonly listener: KeyspaceListener,
    private readonly hotClient = '',
  ) {
    this.owners = evenSlotOwners(opts.primaries);
    this.shards = Array.from({ length: opts.primaries }, () => ({
      busyUntil: 0,
      commands: 0,
      hotCommands: 0,
    }));
    this.random = seededRandom(opts.seed);
    this.hopMean = opts.hop.medianMs;
    this.svcMean = 1000 / opts.serviceRatePerSec;
    const f = opts.failover;
    if (f) clock.at(f.atMs, () => this.failover(f));
    const m = opts.migration;
    if (m) clock.at(m.atMs + m.durationMs, () => this.finishMigration(m));
  }

  /** Commands each primary served (redirects included). */
  commandsPerShard(): number[] {
    return this.shards.map((s) => s.commands);
  }

  hotCommandsPerShard(): number[] {
    return this.shards.map((s) => s.hotCommands);
  }

  /** The primary serving a key's slot now. */
  shardOf(key: string): number {
    return this.owners[keySlot(key)]!;
  }

  /** A Store for gateway `gateway`: the real lease store and limiter over this model. */
  storeFor(gateway: number): Store {
    this.learned[gateway] = new Set();
    this.refreshed[gateway] = new Set();
    // A call's keys share a slot (the lease store sends one key a call in cluster).
    const scripts = () => (name: string, keys: readonly string[], args: readonly string[]) =>
      this.command(gateway, keys[0]!, (t) =>
        name === 'sluiceLeaseTake'
          ? keys.flatMap((key, i) => this.take(key, args.slice(5 * i, 5 * i + 5).map(Number), t))
          : this.giveBack(keys[0]!, args.map(Number), t),
      );
    const leases = leaseStore({ scripts }, { cluster: true });
    const limiter = (o: LimiterOptions) => new QuotaLimiter(this.rlf(gateway, o), o.points);
    return { leases, limiter } as unknown as Store;
  }

  /** rate-limiter-flexible's counter (SET NX EX, INCRBY, PTTL in one script) per consume. */
  private rlf(gateway: number, o: LimiterOptions): RateLimiterStoreAbstract {
    const upsert = (k: string, points: number, tag: WriteTag | undefined) => {
      const key = `${o.keyPrefix}:${k}`;
      return this.command(gateway, key, (t) => {
        if (tag) tag.evalAt = t;
        const live = this.live(key, t);
        const c = live ?? this.create(key, t, o.duration * 1000);
        this.record(key, c, !live);
        c.consumed += points;
        return new RateLimiterRes(Math.max(0, o.points - c.consumed), c.endsAt - t, c.consumed);
      });
    };
    return {
      consume: async (k: string, points: number) => {
        const res = await upsert(k, points, this.tag);
        // As rate-limiter-flexible does: a refusal rejects with the result, not an Error.
        // eslint-disable-next-line @typescript-eslint/only-throw-error
        if (res.consumedPoints > o.points) throw res;
        return res;
      },
      reward: (k: string, points: number) => upsert(k, -points, undefined),
      get: (k: string) => {
        const key = `${o.keyPrefix}:${k}`;
        return this.command(gateway, key, (t) => {
          const c = this.live(key, t);
          return c
            ? new RateLimiterRes(Math.max(0, o.points - c.consumed), c.endsAt - t, c.consumed)
            : null;
        });
      },
    } as unknown as RateLimiterStoreAbstract;
  }

  /** The TAKE script of src/store/lease.ts for one key: [granted, consumed, pttl]. */
  private take(key: string, [want, limit, windowMs, need, divisor]: number[], t: number): number[] {
    const c = this.live(key, t);
    const used = c ? c.consumed : 0;
    const left = limit! - used;
    if (want! <= 0 || left <= 0 || left < need!) return [0, used, c ? c.endsAt - t : -2];
    const grant = Math.min(want!, left, Math.max(need!, Math.floor(left / divisor!)));
    const counter = c ?? this.create(key, t, windowMs!);
    this.record(key, counter, !c);
    counter.consumed += grant;
    return [grant, used + grant, counter.endsAt - t];
  }

  /** The GIVE_BACK script: only to a window with more than `slack` and at most `max` ms left. */
  private giveBack(key: string, [points, slack, max]: number[], t: number): number {
    const c = this.live(key, t);
    const ttl = c ? c.endsAt - t : -2;
    if (!c || ttl <= slack! || ttl > max!) return 0;
    const n = Math.min(points!, c.consumed);
    if (n > 0) {
      this.record(key, c, false);
      c.consumed -= n;
    }
    return n;
  }

  private live(key: string, t: number): Counter | undefined {
    const c = this.keys.get(key);
    if (c && c.endsAt > t) return c;
    if (c) this.keys.delete(key);
    return undefined;
  }

  private create(key: string, t: number, ms: number): Counter {
    const c = { consumed: 0, endsAt: t + ms };
    this.keys.set(key, c);
    this.listener.windowStarted(clientPartOf(key), t, c.endsAt);
    return c;
  }

  /** Journal a mutation the failing primary's replica will not have received. */
  private record(key: string, c: Counter, created: boolean): void {
    const f = this.opts.failover;
    if (!f || this.failedOver) return;
    const t = this.clock.now();
    if (t < f.atMs - f.lostMs || t >= f.atMs || this.shardOf(key) !== f.shard) return;
    this.journal.push({ key, prev: created ? undefined : { ...c } });
  }

  /** The replica takes over: what it had not received is gone. */
  private failover(f: FailoverSpec): void {
    this.failedOver = true;
    const now = this.clock.now();
    for (let i = this.journal.length - 1; i >= 0; i--) {
      const { key, prev } = this.journal[i]!;
      const cur = this.keys.get(key);
      const before = cur && cur.endsAt > now ? cur.consumed : 0;
      if (prev) this.keys.set(key, { ...prev });
      else this.keys.delete(key);
      const after = prev && prev.endsAt > now ? prev.consumed : 0;
      if (before > after) {
        this.lostPoints += before - after;
        this.listener.lost(clientPartOf(key), before - after, now);
      }
    }
    this.journal = [];
    const shard = this.shards[f.shard]!;
    shard.busyUntil = Math.max(shard.busyUntil, f.atMs + f.pauseMs);
  }

  private finishMigration(m: MigrationSpec): void {
    this.migrated = true;
    for (const s of m.slots) this.owners[s] = m.to;
  }

  private hop(leg: 'out' | 'back'): number {
    const r = this.random;
    return legMs(this.opts.hop, leg, r(), r(), r());
  }

  /** Where a migrating key is at `t`: moved once its own moment in the migration passed. */
  private moving(key: string, slot: number, t: number): number | undefined {
    const m = this.opts.migration;
    if (!m || this.migrated || t < m.atMs || !m.slots.includes(slot)) return undefined;
    const at = m.atMs + m.durationMs * ((crcFraction(key) * 7919) % 1);
    return t >= at ? m.to : undefined;
  }

  /**
   * Send one command from `gateway`: hops to the primary its slot map names, redirects
   * (ASK: one more hop to the target with ASKING; MOVED: learn the slot, one more hop), the
   * queue and the service time, then the reply; the client's timeout fails it (StoreError)
   * if no reply comes in time (a paused primary, a lost reply, a long queue).
   */
  command<T>(gateway: number, key: string, run: (t: number) => T): Promise<T> {
    const sentAt = this.clock.now();
    const slot = keySlot(key);
    const deadline = sentAt + this.opts.timeoutMs;
    const hot = this.hotClient !== '' && key.endsWith(this.hotClient);
    return new Promise<T>((resolve, reject) => {
      const fail = () =>
        this.clock.at(deadline, () => {
          this.timeouts++;
          reject(
            new StoreError(`quota store failed: command timed out after ${this.opts.timeoutMs} ms`),
          );
        });
      const visit = (shardIx: number, asking: boolean, extraAt: number) => {
        this.clock.at(extraAt + this.hop('out'), () => {
          const t = this.clock.now();
          const shard = this.shards[shardIx]!;
          const f = this.opts.failover;
          const paused = f && shardIx === f.shard && t >= f.atMs && t < f.atMs + f.pauseMs;
          if (paused && !f.clientPause) return fail();
          const start = Math.max(t, shard.busyUntil);
          const done = start + serviceMs(this.svcMean, this.random()) * (asking ? 2 : 1);
          shard.busyUntil = done;
          shard.commands += asking ? 2 : 1;
          if (hot) shard.hotCommands += asking ? 2 : 1;
          // Redirects: the key left (ASK), or the slot did and this gateway does not know (MOVED).
          const movedTo = this.moving(key, slot, start);
          const owner = this.owners[slot]!;
          if (!asking && movedTo !== undefined && movedTo !== shardIx) {
            this.redirects++;
            return visit(movedTo, true, done + this.hop('back'));
          }
          if (owner !== shardIx && !asking) {
            this.redirects++;
            this.learned[gateway]!.add(slot);
            return visit(owner, false, done + this.hop('back'));
          }
          // A reply the failing primary had not sent when it died is never sent.
          if (f && !f.clientPause && shardIx === f.shard && start < f.atMs && done >= f.atMs) {
            return fail();
          }
          const value = run(start);
          const replyAt = done + this.hop('back');
          if (replyAt > deadline) return fail();
          this.clock.at(replyAt, () => resolve(value));
        });
      };
      let first = this.owners[slot]!;
      const m = this.opts.migration;
      // Until a MOVED tells it, a gateway sends a moved slot's keys to the old primary.
      if (m && this.migrated && m.slots.includes(slot) && !this.learned[gateway]!.has(slot))
        first = shardBefore(this.opts.primaries, slot);
      // After a failover the client re-resolves the slot map once: one more hop.
      const f = this.opts.failover;
      let extra = sentAt;
      if (
        f &&
        !f.clientPause &&
        this.failedOver &&
        first === f.shard &&
        sentAt >= f.atMs + f.pauseMs &&
        !this.refreshed[gateway]!.has(first)
      ) {
        this.refreshed[gateway]!.add(first);
        extra += 2 * this.hopMean;
      }
      visit(first, false, extra);
    });
  }
}

function shardBefore(primaries: number, slot: number): number {
  return Math.floor((slot * primaries) / 16384);
}

/** A key's fixed fraction in [0, 1) (its moment in a migration). */
function crcFraction(key: string): number {
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return (h >>> 0) / 4294967296;
}
