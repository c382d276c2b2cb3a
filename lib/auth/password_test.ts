import assert from "node:assert/strict";
import { DEFAULT_ARGON2_PARAMS, hashPassword, parsePhcParams, verifyPassword } from "./password.ts";

Deno.test("hashPassword: argon2id PHC string with the default parameters and a fresh salt", async () => {
  const a = await hashPassword("correct horse");
  const b = await hashPassword("correct horse");
  assert.match(a, /^\$argon2id\$v=19\$m=19456,t=2,p=1\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/);
  assert.notEqual(a, b, "each hash has its own salt");
  assert.deepEqual(parsePhcParams(a), { ...DEFAULT_ARGON2_PARAMS });
});

Deno.test("verifyPassword: right, wrong, empty and unicode passwords", async () => {
  const h = await hashPassword("pässwörd 🔑");
  assert.equal(await verifyPassword(h, "pässwörd 🔑"), true);
  assert.equal(await verifyPassword(h, "pässwörd"), false);
  assert.equal(await verifyPassword(h, ""), false);
  const empty = await hashPassword("");
  assert.equal(await verifyPassword(empty, ""), true);
  assert.equal(await verifyPassword(empty, " "), false);
});

Deno.test("hashPassword: explicit parameters are encoded in the hash and verify", async () => {
  const h = await hashPassword("pw", { memoryCost: 8192, timeCost: 1, parallelism: 2 });
  assert.deepEqual(parsePhcParams(h), { memoryCost: 8192, timeCost: 1, parallelism: 2 });
  assert.equal(await verifyPassword(h, "pw"), true);
});

Deno.test("verifyPassword: malformed or non-argon2id hashes give false, never throw", async () => {
  const good = await hashPassword("pw");
  const bad = [
    "",
    "garbage",
    "$argon2id$",
    good.replace("$argon2id$", "$argon2i$"),
    good.replace("$v=19$", "$v=16$"),
    good.slice(0, -10),
    good + "!",
    good.replace(/\$[^$]+$/, "$%%%%%%%%%%%%%%%%%%%%%%"),
    "$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy",
    "$argon2id$v=19$m=0,t=0,p=0$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaA",
  ];
  for (const phc of bad) {
    assert.equal(await verifyPassword(phc, "pw"), false, JSON.stringify(phc));
  }
  assert.equal(await verifyPassword(null as unknown as string, "pw"), false);
  assert.equal(await verifyPassword(good, undefined as unknown as string), false);
});

Deno.test("verifyPassword: runs off the main thread (event loop keeps ticking)", async () => {
  const h = await hashPassword("pw");
  await verifyPassword(h, "pw"); // warm-up
  const gaps: number[] = [];
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }, 1);
  const times: number[] = [];
  try {
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      assert.equal(await verifyPassword(h, i % 2 ? "pw" : "nope"), i % 2 === 1);
      times.push(performance.now() - t0);
    }
  } finally {
    clearInterval(timer);
  }
  times.sort((a, b) => a - b);
  const median = times[times.length >> 1];
  const total = times.reduce((a, b) => a + b, 0);
  const maxGap = Math.max(...gaps);
  console.log(
    `argon2 verify median ${median.toFixed(1)} ms; ${gaps.length} ticks over ${
      total.toFixed(0)
    } ms, max tick gap ${maxGap.toFixed(1)} ms`,
  );
  // A blocking verify lets the 1 ms timer fire about once per verify (~20 ticks in all).
  assert.ok(gaps.length > 40, `only ${gaps.length} ticks during 20 verifies`);
});
