/** A walk's worker stuck in its work (test/unit/trust/trust-worker.test.ts): it never answers. */
for (;;) {
  // Spins: nothing but terminate() ends it.
}
