import assert from "node:assert/strict";
import { BasicAuthenticator } from "./basic.ts";
import { hashPassword } from "./password.ts";

const alice = { id: "alice-id", username: "alice", password: await hashPassword("wonderland") };
const bob = { id: "bob-id", username: "bob", password: await hashPassword("builder") };

Deno.test("BasicAuthenticator: right password yields the basic identity", async () => {
  const auth = new BasicAuthenticator([alice, bob]);
  assert.deepEqual(await auth.verify("alice", "wonderland"), {
    id: "alice-id",
    username: "alice",
    provider: "basic",
  });
  assert.deepEqual(await auth.verify("bob", "builder"), {
    id: "bob-id",
    username: "bob",
    provider: "basic",
  });
});

Deno.test("BasicAuthenticator: wrong password, another user's password, unknown user → null", async () => {
  const auth = new BasicAuthenticator([alice, bob]);
  assert.equal(await auth.verify("alice", "wrong"), null);
  assert.equal(await auth.verify("alice", ""), null);
  assert.equal(await auth.verify("alice", "builder"), null);
  assert.equal(await auth.verify("Alice", "wonderland"), null, "usernames are case-sensitive");
  assert.equal(await auth.verify("carol", "wonderland"), null);
  assert.equal(await auth.verify("", ""), null);
});

Deno.test("BasicAuthenticator: no identities configured → everything is null", async () => {
  const auth = new BasicAuthenticator([]);
  assert.equal(await auth.verify("alice", "wonderland"), null);
});

Deno.test("BasicAuthenticator: an identity with a malformed hash can never sign in", async () => {
  const auth = new BasicAuthenticator([
    { id: "x", username: "x", password: "$argon2id$broken" },
    alice,
  ]);
  assert.equal(await auth.verify("x", "$argon2id$broken"), null);
  assert.equal(await auth.verify("x", ""), null);
  assert.deepEqual((await auth.verify("alice", "wonderland"))?.id, "alice-id");
});

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

Deno.test("BasicAuthenticator: unknown user costs the same as a wrong password", async () => {
  const auth = new BasicAuthenticator([alice, bob]);
  await auth.verify("alice", "warm-up");
  await auth.verify("nobody", "warm-up");
  const unknown: number[] = [];
  const wrong: number[] = [];
  // Interleaved so machine load drifts affect both series alike.
  for (let i = 0; i < 30; i++) {
    let t = performance.now();
    assert.equal(await auth.verify(`nobody-${i}`, "guess"), null);
    unknown.push(performance.now() - t);
    t = performance.now();
    assert.equal(await auth.verify("alice", `guess-${i}`), null);
    wrong.push(performance.now() - t);
  }
  const ratio = median(unknown) / median(wrong);
  console.log(
    `unknown-user median ${median(unknown).toFixed(1)} ms, wrong-password median ${
      median(wrong).toFixed(1)
    } ms, ratio ${ratio.toFixed(2)}`,
  );
  assert.ok(median(unknown) > 2, "an unknown user still pays for an argon2 verify");
  assert.ok(ratio > 0.5 && ratio < 2.0, `ratio ${ratio}`);
});

Deno.test("BasicAuthenticator: the dummy hash follows the configured hashes' parameters", async () => {
  // Configured with a much costlier hash than the default: the unknown-user path must match it.
  const params = { memoryCost: 65536, timeCost: 3, parallelism: 1 };
  const carol = { id: "c", username: "carol", password: await hashPassword("pw", params) };
  const auth = new BasicAuthenticator([carol]);
  await auth.verify("carol", "x");
  await auth.verify("nobody", "x");
  const unknown: number[] = [];
  const wrong: number[] = [];
  for (let i = 0; i < 8; i++) {
    let t = performance.now();
    await auth.verify("nobody", "x");
    unknown.push(performance.now() - t);
    t = performance.now();
    await auth.verify("carol", "x");
    wrong.push(performance.now() - t);
  }
  const ratio = median(unknown) / median(wrong);
  assert.ok(ratio > 0.5 && ratio < 2.0, `ratio ${ratio}`);
});
