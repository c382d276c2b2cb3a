// Property fuzzing of mime_type detection: every file of every layer goes through it.
import assert from "node:assert/strict";
import { isText, mimeType } from "./mime.ts";
import { FAST_MS, fc, fuzzParams, withinSync } from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();
const TYPE = /^[a-z0-9.+-]+\/[a-z0-9.+-]+$/i;

Deno.test("fuzz mime: any path and head give a well-formed type, fast", () => {
  const path = fc.oneof(
    fc.string({ maxLength: 200 }),
    fc.constantFrom("a.py", "x.tar.gz", ".bashrc", "dir.d/", "a.", "a.JSON", "b.PEM"),
  );
  const head = fc.oneof(
    fc.uint8Array({ maxLength: 9000 }),
    fc.tuple(
      fc.constantFrom("#!", "#!/usr/bin/env ", "#! /bin/", "\x7fELF", "\xef\xbb\xbf  -----BEGIN "),
      fc.string({ maxLength: 300 }),
    ).map(([a, b]) => enc.encode(a + b)),
  );
  fc.assert(
    fc.property(path, head, (p, h) => {
      const t = withinSync(FAST_MS, "mimeType", () => mimeType(p, h));
      assert.match(t, TYPE);
      if (!isText(h) && t.startsWith("text/")) {
        assert.fail(`a head with NUL bytes typed ${t}`);
      }
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz mime: a long #!/usr/bin/env line of options stays fast", () => {
  const line = "#!/usr/bin/env " + "-u x ".repeat(50_000) + "A=b ".repeat(50_000) + "python3";
  assert.equal(
    withinSync(FAST_MS, "mimeType", () => mimeType("run", enc.encode(line))),
    mimeType("x.py", enc.encode("x")),
  );
});
