// Property and mutation fuzzing of PEM blocks and the X.509 reader: any file of a layer that
// holds a BEGIN CERTIFICATE line is parsed.
import assert from "node:assert/strict";
import { opensWithPem, pemBlocks } from "./pem.ts";
import {
  FAST_MS,
  fc,
  fuzzParams,
  mutated,
  mutatedText,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();

async function opensslCert(): Promise<string | null> {
  try {
    const out = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "/dev/null",
        "-days",
        "2",
        "-subj",
        "/CN=fuzz+OU=multi/O=Acme\\, Inc./C=DE",
        "-addext",
        "subjectAltName=DNS:a.example,IP:10.0.0.1,email:x@example.com",
      ],
      stdout: "piped",
      stderr: "null",
    }).output();
    return out.success ? new TextDecoder().decode(out.stdout) : null;
  } catch {
    return null;
  }
}

const CERT = await opensslCert();

function check(text: Uint8Array): void {
  const blocks = pemBlocks(text, text);
  opensWithPem(text);
  if (blocks === null) return;
  // one block per BEGIN line at most, so the output is bounded by the input
  assert.ok(blocks.length <= text.length / 16 + 1);
  for (const b of blocks) {
    assert.equal(typeof b.label, "string");
    if (b.certificate) {
      assert.equal(b.label, "CERTIFICATE");
      assert.ok(!Number.isNaN(Date.parse(b.certificate.not_before)));
      assert.ok(b.certificate.subject.length < text.length * 4 + 64);
    }
  }
}

Deno.test("fuzz pem: random text around PEM markers never throws", () => {
  const piece = fc.oneof(
    fc.constantFrom(
      "-----BEGIN CERTIFICATE-----\n",
      "-----END CERTIFICATE-----\n",
      "-----BEGIN PRIVATE KEY-----\n",
      "-----END X-----\r\n",
      "  -----BEGIN CERTIFICATE-----  \n",
      "MIIB\n",
      "====\n",
      "\n",
    ),
    fc.string({ maxLength: 80 }),
    fc.base64String({ maxLength: 200 }),
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 30 }), (parts) => {
      check(enc.encode("-----BEGIN CERTIFICATE-----\n" + parts.join("")));
    }),
    fuzzParams(),
  );
});

Deno.test({
  name: "fuzz pem: mutations of a real certificate never throw",
  ignore: CERT === null,
  fn() {
    const blocks = pemBlocks(enc.encode(CERT!), enc.encode(CERT!))!;
    assert.equal(blocks.length, 1);
    assert.ok(blocks[0].certificate, "the clean sample decodes");
    assert.deepEqual(blocks[0].certificate.names, ["a.example", "10.0.0.1"]);
    fc.assert(
      fc.property(mutatedText(CERT!, 4), (text) => check(enc.encode(text))),
      fuzzParams(),
    );
  },
});

Deno.test({
  name: "fuzz pem: mutations of a certificate's DER never throw",
  ignore: CERT === null,
  fn() {
    const b64 = CERT!.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
    const der = Uint8Array.fromBase64(b64);
    fc.assert(
      fc.property(mutated(der, 6), (bad) => {
        const pem = `-----BEGIN CERTIFICATE-----\n${bad.toBase64()}\n-----END CERTIFICATE-----\n`;
        withinSync(FAST_MS, "pemBlocks", () => check(enc.encode(pem)));
      }),
      fuzzParams(),
    );
  },
});

Deno.test("fuzz pem: many markers in 4 MiB stay fast", () => {
  // the marker regex runs over the whole text: no input shape may make it backtrack
  const lines = "-----BEGIN " + "-".repeat(200_000) + "\n" + "-----END ".repeat(100_000);
  withinSync(
    FAST_MS * 2,
    "pemBlocks",
    () => check(enc.encode("-----BEGIN CERTIFICATE-----\n" + lines)),
  );
});
