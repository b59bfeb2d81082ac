/** Resolve on the first SIGINT or SIGTERM; a second one while closing exits at once. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.once('SIGINT', () => process.exit(130));
      process.once('SIGTERM', () => process.exit(143));
      resolve(signal);
    };
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  });
}
