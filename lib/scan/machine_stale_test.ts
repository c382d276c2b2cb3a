// Which stored reports were built from parses that could not run (older versions' reports of a
// server without a sandbox), and which say something about the image (a verdict, a limit).
import assert from "node:assert/strict";
import { builtOnFailedParses } from "./machine_stale.ts";

const L = `sha256:${"a".repeat(64)}`;

Deno.test("reports built while a parse could not run are told from reports with verdicts", () => {
  const stale = [
    `layer ${L} is unsupported: index: no sandbox process could be started (Requires run access to "deno"); set sandbox = "off" to parse in the serving process`,
    `layer ${L} is unsupported: index: no sandbox worker could be started (boom)`,
    `layer ${L} is unsupported: index sandbox died (signal SIGKILL)`,
    `layer ${L} is unavailable: index sandbox was ended by SIGKILL from outside`,
    "the layers' files were not looked through: scan: no sandbox process could be started (x)",
    "packages and config were not read: scan: no sandbox process could be started (x)",
  ];
  for (const w of stale) {
    assert.equal(builtOnFailedParses({ warnings: ["fine", w] }), true, w);
  }
  const sound = [
    `layer ${L} is unsupported: not a tar archive (bad header)`,
    `layer ${L} is partial: budget max_entries`,
    "packages and config were not read: budget max_memory_bytes (1) exceeded: reached 2",
    `layer ${L} is unsupported: index sandbox died (signal SIGSEGV)`,
    // a file's name quoting the text is no machine failure
    "var/lib/no sandbox process could be started: 9 bytes, over max_database_size: not read",
  ];
  for (const w of sound) assert.equal(builtOnFailedParses({ warnings: [w] }), false, w);
  assert.equal(builtOnFailedParses({ warnings: undefined }), false);
  assert.equal(builtOnFailedParses({ warnings: "no sandbox process could be started" }), false);
});
