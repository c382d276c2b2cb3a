import assert from "node:assert/strict";
import { parseArgs } from "./cli.ts";
import { COMMANDS, helpText } from "./usage.ts";

Deno.test("verify's arguments: --rate bytes per second (0: no limit), else the config's", () => {
  assert.equal(parseArgs(["verify"]).rate, null);
  assert.equal(parseArgs(["verify", "--rate", "0"]).rate, 0);
  const cli = parseArgs(["verify", "--dry-run", "--namespace", "team/app", "--rate", "1048576"]);
  assert.deepEqual([cli.command, cli.dryRun, cli.namespace, cli.rate], [
    "verify",
    true,
    "team/app",
    1048576,
  ]);
  for (const bad of [["--rate"], ["--rate", "-1"], ["--rate", "1.5"], ["--rate", "10M"]]) {
    assert.throws(() => parseArgs(["verify", ...bad]), /--rate needs bytes per second/);
  }
});

Deno.test("verify is listed and has its own help", () => {
  assert.ok(COMMANDS.includes("verify"));
  assert.match(helpText(null), /\n {2}verify {2,}re-hash stored blobs against their digests/);
  assert.match(
    helpText("verify"),
    /^Usage: main\.ts verify \[--dry-run\] \[--namespace N\] \[--rate BYTES_PER_SEC\]/,
  );
  assert.match(
    helpText("verify"),
    /Exit status: 0 nothing wrong, 1 another verify runs or the pass failed/,
  );
});
