/**
 * Keeps the relay running as an operator's supervisor would (systemd's Restart=always): when
 * it dies (the OOM killer), the death is recorded and the relay started again on the same
 * port and data, inside the same group, while the flood goes on.
 */
import type { ProcessExit } from '../../harness/processes.js';
import type { OomRelay, RelayUnderTest } from './relays.js';

export interface Death {
  /** Seconds on the run's clock. */
  t: number;
  signal: NodeJS.Signals | null;
  code: number | null;
  /** Seconds until the relay answered again (null: it did not before the run ended). */
  downSec: number | null;
}

const RESTART_BACKOFF_MS = 500;

export class Supervisor {
  readonly deaths: Death[] = [];
  private current!: RelayUnderTest;
  private stopping = false;
  private restarting: Promise<void> | undefined;
  /** Called once the relay answers again after a death (e.g. its clients reconnect). */
  onRestart: () => void = () => {};

  constructor(
    private readonly relay: OomRelay,
    private readonly procsFile: string | undefined,
    private readonly clock: () => number,
    private readonly log: (line: string) => void,
  ) {}

  get url(): string {
    return this.current.url;
  }

  get pid(): number {
    return this.current.pid;
  }

  async begin(): Promise<void> {
    this.watch(await this.relay.start(this.procsFile));
  }

  private watch(proc: RelayUnderTest): void {
    this.current = proc;
    void proc.exited.then((exit) => {
      if (this.stopping || this.current !== proc) return;
      this.restarting = this.restart(exit);
    });
  }

  private async restart(exit: ProcessExit): Promise<void> {
    const death: Death = { t: this.clock(), signal: exit.signal, code: exit.code, downSec: null };
    this.deaths.push(death);
    this.log(
      `  relay died at ${death.t.toFixed(1)} s (${exit.signal ?? `exit ${exit.code}`}): restarting`,
    );
    while (!this.stopping) {
      try {
        this.watch(await this.relay.start(this.procsFile));
        death.downSec = this.clock() - death.t;
        this.onRestart();
        return;
      } catch (err) {
        this.log(`  relay restart failed: ${err instanceof Error ? err.message : String(err)}`);
        await new Promise((r) => setTimeout(r, RESTART_BACKOFF_MS));
      }
    }
  }

  /** Stop restarting and stop the relay gracefully; says how its last process ended. */
  async stop(): Promise<ProcessExit> {
    this.stopping = true;
    await this.restarting;
    return this.current.stop();
  }
}
