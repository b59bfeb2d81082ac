/**
 * `pending`'s outcome, or a rejection with `timeoutError()` once `ms` have passed, whichever
 * comes first. The timer is cleared either way, so it never keeps the process alive.
 */
export async function withinDeadline<T>(
  pending: Promise<T>,
  ms: number,
  timeoutError: () => Error,
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeoutError()), ms);
  });
  try {
    return await Promise.race([pending, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
