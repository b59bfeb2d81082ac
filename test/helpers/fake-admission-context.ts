/**
 * The least of a GatewayContext the admission step needs, in process: the real config,
 * policy, metrics and pool, with a scripted quota decider and an in-memory key-value store,
 * so a property test can drive `Admission` and see every charge it made.
 */
import type { FastifyBaseLogger } from 'fastify';
import { GatewayConfigSchema } from '../../src/config/schema.js';
import type { GatewayConfig, GatewayConfigInput, IdentitySource } from '../../src/config/schema.js';
import { Admission } from '../../src/gateway/admission.js';
import type { AdmissionServices } from '../../src/gateway/admission.js';
import { GatewayMetrics } from '../../src/gateway/metrics.js';
import { UpstreamPool } from '../../src/gateway/upstreams.js';
import { MultiplierBoard } from '../../src/pressure/follower/board.js';
import type { QuotaDecider, QuotaDecision, QuotaRequest } from '../../src/quota/decider.js';
import { Policy } from '../../src/quota/policy.js';
import { StoreError } from '../../src/store/index.js';
import type { KeyValue, Store } from '../../src/store/index.js';

/** What the scripted decider answers, in turn: free (null), admitted, refused or failed. */
export type ScriptedAnswer =
  'free' | 'allowed' | 'limited' | 'insured-no' | 'error-open' | 'error-closed';

export interface Charge {
  source: IdentitySource;
  raw: string;
  cls: 'write' | 'read';
  cost: number;
  /** True when the request may go on (free or admitted). */
  admitted: boolean;
  /** Nothing was counted: the request was free (or the store failed and it was let through). */
  uncounted?: boolean;
}

/** Answers each decision from a script (cycled), recording it. */
export class ScriptedDecider {
  readonly charges: Charge[] = [];
  storeDown = false;
  private turn = 0;

  constructor(private readonly script: readonly ScriptedAnswer[]) {}

  decide(req: QuotaRequest): Promise<QuotaDecision | null> {
    const answer = this.script.length ? this.script[this.turn++ % this.script.length]! : 'free';
    const decision = decisionOf(answer, req);
    const { source, raw } = req.identity;
    this.charges.push({
      source,
      raw,
      cls: req.cls,
      cost: req.cost,
      admitted: decision === null || decision.admitted,
      uncounted: decision?.receipt === undefined,
    });
    return Promise.resolve(decision);
  }

  /** Refunds asked, in order. */
  readonly refunds: Charge[] = [];

  /** What the decider holds per client (sluice_tracked_clients): nothing here. */
  trackedClients(): Record<string, number> {
    return {};
  }

  refund(req: QuotaRequest): Promise<boolean> {
    const { source, raw } = req.identity;
    this.refunds.push({ source, raw, cls: req.cls, cost: req.cost, admitted: true });
    return Promise.resolve(true);
  }

  /** No in-memory blocks here: every charge is asked of the script. */
  knownOverLimit(): QuotaDecision | null {
    return null;
  }

  /** Node budgets are not scripted here: nothing is charged to them (test/node-budget*). */
  chargesNode(): boolean {
    return false;
  }
}

function decisionOf(answer: ScriptedAnswer, req: QuotaRequest): QuotaDecision | null {
  if (answer === 'free') return null;
  const outcome = answer.startsWith('error')
    ? 'error'
    : answer === 'insured-no'
      ? 'insured'
      : answer;
  const admitted = answer === 'allowed' || answer === 'error-open';
  return {
    outcome: outcome as QuotaDecision['outcome'],
    admitted,
    policy: `${req.cls}s`,
    limit: 10,
    windowSec: 60,
    remaining: admitted ? 5 : 0,
    resetSec: 3,
    multiplier: 1,
    fromMemory: false,
    receipt: outcome === 'allowed' ? { into: 'store', until: Date.now() + 3000 } : undefined,
  };
}

/** SET NX with leases, in a Map; every call fails with StoreError while `failing`. */
export class MemoryKv implements KeyValue {
  readonly keys = new Map<string, string>();
  failing = false;

  private check(what: string): void {
    if (this.failing) throw new StoreError(`${what} failed: scripted failure`);
  }
  setWithLease(key: string, value: string): Promise<void> {
    return this.set(key, value);
  }
  set(key: string, value: string): Promise<void> {
    this.check('SET');
    this.keys.set(key, value);
    return Promise.resolve();
  }
  get(key: string): Promise<string | null> {
    this.check('GET');
    return Promise.resolve(this.keys.get(key) ?? null);
  }
  claim(key: string, value: string): Promise<boolean> {
    this.check('SET NX');
    if (this.keys.has(key)) return Promise.resolve(false);
    this.keys.set(key, value);
    return Promise.resolve(true);
  }
  del(key: string): Promise<void> {
    this.check('DEL');
    this.keys.delete(key);
    return Promise.resolve();
  }
  publish(): Promise<number> {
    return Promise.resolve(0);
  }
}

/** A logger that says nothing (in-process tests). */
export const silent = {
  fatal: () => undefined,
  error: () => undefined,
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
  trace: () => undefined,
  silent: () => undefined,
  level: 'silent',
  child: () => silent,
} as unknown as FastifyBaseLogger;

/** One registry for every run: each GatewayMetrics starts the default collectors again. */
let sharedMetrics: GatewayMetrics | undefined;

/** The process's one GatewayMetrics, made on first use with this board and pool. */
export function metricsFor(board: MultiplierBoard, pool: UpstreamPool): GatewayMetrics {
  return (sharedMetrics ??= new GatewayMetrics(board, pool));
}

/**
 * What the admission step reads of a gateway, in process, around a real decider (on a real or
 * fake Valkey): the configuration, store, policy and decider given, a pool of the configured
 * nodes, and silent metrics and logs.
 */
export function admissionServices(parts: {
  config: GatewayConfig;
  store: Store;
  policy: Policy;
  decider: QuotaDecider;
  board: MultiplierBoard;
}): AdmissionServices {
  const { config, board } = parts;
  const pool = new UpstreamPool(config.upstreams, config.routing, config.healthCheck, silent);
  return { ...parts, pool, metrics: metricsFor(board, pool), log: silent };
}

export interface AdmissionUnderTest {
  admission: Admission;
  config: GatewayConfig;
  decider: ScriptedDecider;
  kv: MemoryKv;
  ctx: AdmissionServices;
}

/** One relay node that is never contacted; the rest of the settings as given. */
export function admissionUnderTest(
  settings: Omit<GatewayConfigInput, 'admin' | 'upstreams'>,
  script: readonly ScriptedAnswer[],
  /** Another decider than the script's (e.g. ClockedDecider), and the clock admission reads. */
  options: { decider?: object; now?: () => number } = {},
): AdmissionUnderTest {
  const config = GatewayConfigSchema.parse({
    admin: { token: 'properties-admin-token-0123' },
    upstreams: [{ id: 'relay-a', url: 'http://127.0.0.1:9' }],
    ...settings,
  });
  const policy = new Policy(config.quotas);
  const board = new MultiplierBoard(config.upstreams.map((u) => u.id));
  const pool = new UpstreamPool(config.upstreams, config.routing, config.healthCheck, silent);
  const decider = new ScriptedDecider(script);
  const kv = new MemoryKv();
  // Only what the admission step reads: the store's kv, the decider's decide and storeDown.
  const ctx: AdmissionServices = {
    config,
    store: { kv } as unknown as Store,
    policy,
    decider: (options.decider ?? decider) as unknown as QuotaDecider,
    pool,
    metrics: metricsFor(board, pool),
    log: silent,
    board,
  };
  const admission = new Admission(ctx, options.now);
  return { admission, config, decider, kv, ctx };
}
