/**
 * A value now, or later. The quota path answers most writes from memory (a leased point, an
 * in-memory block): those return the value itself, so they cost no promise and no turn of
 * the event loop; only a write that waits for Valkey returns a promise. Callers that await
 * either get the same result.
 */
export type Maybe<T> = T | Promise<T>;

/** `then` for a Maybe: `f` runs at once on a value, after it on a promise. */
export function after<T, U>(value: Maybe<T>, f: (t: T) => Maybe<U>): Maybe<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}

/** Promise.all for Maybes: the values themselves when none is a promise. */
export function allOf<T>(values: readonly Maybe<T>[]): Maybe<T[]> {
  for (const v of values) if (v instanceof Promise) return Promise.all(values);
  return values as T[];
}
