/** What a stopping command reports; pino's logger fits, and so does a console adapter. */
export interface StopLog {
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

/** For commands without a logger: the messages go to stderr (stdout holds the ready line). */
export const STDERR_STOP_LOG: StopLog = {
  info: (fields, message) => console.error(`${message} ${JSON.stringify(fields)}`),
  error: (fields, message) => console.error(`${message} ${JSON.stringify(fields)}`),
};

/**
 * How every long-running command stops: on SIGTERM or SIGINT (or the returned function,
 * for any other reason) `close` runs once, then the process exits 0, or 1 if closing failed
 * or took longer than `graceMs`. A second signal while closing exits at once.
 */
export function stopOnSignals(
  graceMs: number,
  close: () => Promise<void>,
  log: StopLog = STDERR_STOP_LOG,
): (why: string) => void {
  let stopping = false;
  const stop = (why: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: why }, 'shutting down');
    const force = setTimeout(() => process.exit(1), graceMs);
    force.unref();
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const [signal, code] of [
    ['SIGTERM', 143],
    ['SIGINT', 130],
  ] as const) {
    process.on(signal, () => (stopping ? process.exit(code) : stop(signal)));
  }
  return stop;
}
