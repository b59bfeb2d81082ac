import { clamp, EmergencyLatch, lawOf } from './law.js';
import type { ControlLaw, LawInput, LawOutput } from './law.js';

/**
 * The relay report's PID limiter, kept as a comparison law: same gains, weights and
 * thresholds, so its weaknesses show on our plant. Not meant for production use.
 */
export interface PidLawParams {
  kp: number;
  ki: number;
  kd: number;
  /** Setpoint of the process variable. */
  setpoint: number;
  /** Weight of memory in the process variable; the rest goes to the load term. */
  memoryWeight: number;
  /** Low-pass weight of each new error in the derivative (per evaluation). */
  derivativeAlpha: number;
  integralMin: number;
  integralMax: number;
  /** Most delay per write in normal mode (s). */
  maxDelaySec: number;
  /** Emergency: enter at this memory ratio ... */
  uEmerg: number;
  /** ... leave at this one, at once. */
  uExit: number;
  /** Emergency delay = PID delay x (1 + gain x excess over uEmerg), within [min, max]. */
  emergencyGain: number;
  emergencyMinDelaySec: number;
  emergencyMaxDelaySec: number;
  /**
   * Writes per second one writer would make undelayed, to map the delay to a share:
   * m = 1 / (1 + rate x delay). The report's import ran 93 events/s on one connection; 10/s
   * stands for an ordinary busy client.
   */
  writerRatePerSec: number;
  /** With a backlog input, the load term is backlog / this, capped at 1 (else the term is 0). */
  acceptableBacklogBytes?: number;
}

export const DEFAULT_PID_LAW_PARAMS: Readonly<PidLawParams> = {
  kp: 0.5,
  ki: 0.1,
  kd: 0.05,
  setpoint: 0.85,
  memoryWeight: 0.7,
  derivativeAlpha: 0.2,
  integralMin: -2,
  integralMax: 2,
  maxDelaySec: 1,
  uEmerg: 1.167,
  uExit: 0.833,
  emergencyGain: 5,
  emergencyMinDelaySec: 0.1,
  emergencyMaxDelaySec: 5,
  writerRatePerSec: 10,
};

/**
 * The share of its writes a writer keeps when each write first sleeps `delaySec`: one that
 * would write `rate` times a second now writes rate / (1 + rate x delay). A delay bounds
 * one sequential writer, not a quota: N concurrent writers still get N times as much, so
 * this mapping flatters the reference law.
 */
export function delayToMultiplier(delaySec: number, writerRatePerSec: number): number {
  return 1 / (1 + writerRatePerSec * Math.max(0, delaySec));
}

/**
 * The PID evaluated on the tick (the original advanced per request, dt being the time
 * between requests, so its filter and integral ran at the pace of traffic). Its weaknesses
 * are kept on purpose: with the load term at 0 the process variable 0.7 x u only passes
 * the 0.85 setpoint above u = 1.21, and the integral sits at its floor while idle, so it
 * barely acts below the emergency threshold.
 */
export function createPidLaw(params: Partial<PidLawParams> = {}): ControlLaw {
  const p: PidLawParams = { ...DEFAULT_PID_LAW_PARAMS, ...params };
  if (!(p.writerRatePerSec > 0)) throw new RangeError('pid law: writerRatePerSec must be > 0');
  if (!(p.uExit < p.uEmerg)) throw new RangeError('pid law: uExit must be below uEmerg');
  const latch = new EmergencyLatch({ enterAt: p.uEmerg, exitAt: p.uExit, dwellSec: 0 });
  let started = false;
  let integral = 0;
  let filtered = 0;
  let lastDelay = 0;

  function load(input: LawInput): number {
    const acceptable = p.acceptableBacklogBytes;
    if (!input.backlog || !acceptable) return 0;
    return clamp(input.backlog.bytes / acceptable, 0, 1);
  }

  function pidDelay(error: number, dt: number): number {
    if (!started) {
      // Like the original: the first call only seeds the state and asks for no delay.
      started = true;
      filtered = error;
      return 0;
    }
    // A repeated instant changes nothing (the original bumped dt to 1 ms instead).
    if (dt <= 0) return lastDelay;
    integral = clamp(integral + error * dt, p.integralMin, p.integralMax);
    const next = p.derivativeAlpha * error + (1 - p.derivativeAlpha) * filtered;
    const derivative = (next - filtered) / dt;
    filtered = next;
    lastDelay = clamp(p.kp * error + p.ki * integral + p.kd * derivative, 0, p.maxDelaySec);
    return lastDelay;
  }

  return lawOf('pid', (input: LawInput, dt: number): LawOutput => {
    const { t, u } = input;
    const pv = p.memoryWeight * u + (1 - p.memoryWeight) * load(input);
    let delay = pidDelay(pv - p.setpoint, dt);
    const mode = latch.update(t, u);
    if (mode === 'emergency') {
      const scaled = delay * (1 + p.emergencyGain * Math.max(0, u - p.uEmerg));
      delay = clamp(scaled, p.emergencyMinDelaySec, p.emergencyMaxDelaySec);
    }
    const m = delayToMultiplier(delay, p.writerRatePerSec);
    return { m, u, uhat: u, mode, emergencyEntries: latch.entries };
  });
}
