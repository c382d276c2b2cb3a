// What a test may set in the environment of a server it starts (tests/helpers/server.ts's `env`
// option): never an operator's setting, so not in the config. Read here, at the entry points,
// and handed into lib/ as plain options: no lib/ module reads a test knob.

/**
 * WHARF_TEST_CACHE_HOLD_MS: how long a pull stamp keeps a cached image in use (ms), shortened so
 * a test can watch the hold expire; undefined (a minute) when unset or not a positive integer.
 */
export function testCacheHoldMs(): number | undefined {
  try {
    const v = Number(Deno.env.get("WHARF_TEST_CACHE_HOLD_MS"));
    if (Number.isSafeInteger(v) && v > 0) return v;
  } catch { /* no env permission: the default */ }
  return undefined;
}
