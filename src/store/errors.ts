/**
 * Errors of the store layer. A store failure is never a rate-limit rejection: callers see
 * a StoreError (or a config/connect error at start), never a RateLimiterRes.
 */

/** The store options are invalid; the message names the offending key. */
export class StoreConfigError extends Error {
  override name = 'StoreConfigError';
}

/** The store could not be reached or did not become ready within the connect timeout. */
export class StoreConnectError extends Error {
  override name = 'StoreConnectError';
}

/** A command against a connected store failed (timeout, connection lost, server error). */
export class StoreError extends Error {
  override name = 'StoreError';
}

export function describeError(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

/** Run one store call; any failure becomes a StoreError that names `what`. */
export async function storeCall<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new StoreError(`${what} failed: ${describeError(err)}`, { cause: err });
  }
}
