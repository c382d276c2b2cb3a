// PEM blocks and certificates against openssl: RSA and EC certificates made here with SANs
// (DNS and IPv4), multi-valued and UTF-8 names, compared with `openssl x509` output; the
// system CA bundle; mixed blocks in order; the 64 KiB and 4 MiB limits; broken blocks.
import assert from "node:assert/strict";
import { pemBlocks } from "./pem.ts";

const enc = new TextEncoder();

async function openssl(args: string[], stdin?: string): Promise<string> {
  const p = new Deno.Command("openssl", {
    args,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = p.stdin.getWriter();
    await w.write(enc.encode(stdin));
    await w.close();
  }
  const out = await p.output();
  const dec = new TextDecoder();
  if (!out.success) throw new Error(`openssl ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

/** What openssl says about a certificate, in the details' terms. */
async function expected(pem: string) {
  const t = await openssl(
    [
      "x509",
      "-noout",
      "-subject",
      "-issuer",
      "-startdate",
      "-enddate",
      "-nameopt",
      "RFC2253,-esc_msb",
      "-ext",
      "subjectAltName",
    ],
    pem,
  );
  const date = (k: string) =>
    new Date(new RegExp(`${k}=(.*)`).exec(t)![1]).toISOString().replace(".000Z", "Z");
  const san = /X509v3 Subject Alternative Name:\s*\n\s*(.*)/.exec(t)?.[1] ?? "";
  return {
    subject: /subject=(.*)/.exec(t)![1],
    issuer: /issuer=(.*)/.exec(t)![1],
    not_before: date("notBefore"),
    not_after: date("notAfter"),
    names: san.split(/,\s*/).flatMap((s) => {
      const m = /^(DNS|IP Address):(.*)$/.exec(s.trim());
      return m && (m[1] === "DNS" || /^\d+\.\d+\.\d+\.\d+$/.test(m[2])) ? [m[2]] : [];
    }),
  };
}

async function makeCert(dir: string, name: string, keyArgs: string[], subj: string, san: string) {
  const key = `${dir}/${name}.key`;
  const crt = `${dir}/${name}.crt`;
  await openssl([
    "req",
    "-x509",
    ...keyArgs,
    "-nodes",
    "-keyout",
    key,
    "-out",
    crt,
    "-days",
    "30",
    "-subj",
    subj,
    "-utf8",
    "-multivalue-rdn",
    "-addext",
    `subjectAltName=${san}`,
  ]);
  return { cert: await Deno.readTextFile(crt), key: await Deno.readTextFile(key) };
}

const details = (text: string) => {
  const b = enc.encode(text);
  return pemBlocks(b.subarray(0, 64 * 1024), b);
};

Deno.test("pem: RSA and EC certificates match openssl (names, dates, SANs)", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const rsa = await makeCert(
      dir,
      "rsa",
      ["-newkey", "rsa:2048"],
      "/C=DE/O=Wharf Test/OU=Ops+CN=rsa.example.com",
      "DNS:rsa.example.com,DNS:*.rsa.example.com,IP:10.1.2.3,IP:::1,email:a@b.c",
    );
    const ec = await makeCert(
      dir,
      "ec",
      ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
      "/C=FR/O=Société Générale d'Essai/CN=ec.example.org",
      "DNS:ec.example.org,IP:192.168.7.9",
    );
    for (const c of [rsa, ec]) {
      const got = details(c.cert);
      assert.ok(got);
      assert.equal(got.length, 1);
      assert.equal(got[0].label, "CERTIFICATE");
      assert.deepEqual(got[0].certificate, await expected(c.cert));
    }
    // certificate, key, certificate: every block, in order, the key by label only
    const mixed = details(`${rsa.cert}\n${ec.key}${ec.cert}`)!;
    assert.deepEqual(mixed.map((b) => b.label), ["CERTIFICATE", "PRIVATE KEY", "CERTIFICATE"]);
    assert.equal(mixed[1].certificate, undefined);
    assert.equal(mixed[2].certificate!.subject, (await expected(ec.cert)).subject);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("pem: the system CA bundle, every certificate parsed", async () => {
  const path = "/etc/ssl/certs/ca-certificates.crt";
  const text = await Deno.readTextFile(path);
  const count = text.split("-----BEGIN CERTIFICATE-----").length - 1;
  assert.ok(count > 100, `${count} certificates in ${path}`);
  const got = details(text)!;
  assert.equal(got.length, count);
  assert.ok(got.every((b) => b.certificate?.subject && b.certificate.not_after));
  // spot-check the first and the last against openssl
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g)!;
  assert.deepEqual(got[0].certificate, await expected(blocks[0]));
  assert.deepEqual(got[count - 1].certificate, await expected(blocks[count - 1]));
});

Deno.test("pem: the 64 KiB and 4 MiB limits, broken blocks", async () => {
  const bundle = await Deno.readTextFile("/etc/ssl/certs/ca-certificates.crt");
  const one = bundle.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----\n/)![0];
  // no BEGIN CERTIFICATE line in the first 64 KiB: not a certificate file
  assert.equal(details("x".repeat(70 * 1024) + "\n" + one), null);
  assert.equal(details("just text\n"), null);
  assert.equal(details("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n"), null);
  // blocks after the first 4 MiB are not listed
  const pad = "#".repeat(1000) + "\n";
  const big = one + pad.repeat(Math.ceil((4 * 1024 * 1024) / pad.length)) + one;
  assert.equal(details(big)!.length, 1);
  // garbage inside a certificate block, and a block cut short: labels only, no throw
  const broken = details(
    "-----BEGIN CERTIFICATE-----\n!!!not base64!!!\n-----END CERTIFICATE-----\n" +
      "-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAK\n-----END CERTIFICATE-----\n" + one +
      "-----BEGIN CERTIFICATE-----\nMIIB",
  )!;
  assert.deepEqual(broken.map((b) => b.label), [
    "CERTIFICATE",
    "CERTIFICATE",
    "CERTIFICATE",
    "CERTIFICATE",
  ]);
  assert.equal(broken[0].certificate, undefined);
  assert.equal(broken[1].certificate, undefined);
  assert.ok(broken[2].certificate);
  assert.equal(broken[3].certificate, undefined);
});
