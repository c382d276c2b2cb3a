// Throwaway PKI for mTLS tests, made with the `openssl` CLI so the certificates are ordinary
// X.509 v3 (rustls/webpki reject v1 certificates, CN-only server names and CAs without
// basicConstraints, so every extension below is load-bearing).
import { join } from "node:path";

export interface Pki {
  /** CA that signs the server certificate and the trusted client certificate */
  caCert: string;
  /** for 127.0.0.1 and localhost (SAN) */
  serverCert: string;
  serverKey: string;
  /** CN=alice, O=Acme, O=Acme Labs, OU=ops, signed by caCert */
  clientCert: string;
  clientKey: string;
  /** a CA the server does not trust */
  otherCaCert: string;
  /** CN=mallory, O=Acme, OU=ops, signed by otherCaCert */
  otherClientCert: string;
  otherClientKey: string;
}

async function openssl(cwd: string, args: string[]): Promise<void> {
  let out;
  try {
    out = await new Deno.Command("openssl", { args, cwd, stdout: "piped", stderr: "piped" })
      .output();
  } catch (e) {
    throw new Error(`openssl is required for TLS tests: ${e instanceof Error ? e.message : e}`);
  }
  if (!out.success) {
    throw new Error(
      `openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr).trim()}`,
    );
  }
}

/**
 * Whether openssl is missing, so `suite`'s tests are skipped (the reason printed); under
 * WHARF_REQUIRE_TOOLS=1 (CI) a missing openssl fails the run instead of skipping.
 */
export function opensslMissing(suite: string): boolean {
  try {
    if (
      new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
        .outputSync().success
    ) return false;
  } catch { /* not installed */ }
  const reason = "openssl not found (apt-get install openssl)";
  if (Deno.env.get("WHARF_REQUIRE_TOOLS") === "1") {
    throw new Error(`WHARF_REQUIRE_TOOLS=1 but the ${suite} tests cannot run: ${reason}`);
  }
  console.warn(`SKIPPING ${suite} tests: ${reason}`);
  return true;
}

const EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

async function makeCa(dir: string, name: string, subject: string): Promise<void> {
  await openssl(dir, [
    "req",
    "-x509",
    ...EC,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.crt`,
    "-days",
    "2",
    "-subj",
    subject,
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  ]);
}

/**
 * A key and a certificate for `subject` signed by the CA `ca`, with `extensions` (X.509 v3); none
 * given, `openssl x509 -req` makes an X.509 v1 certificate (as older CAs issue).
 */
async function makeLeaf(
  dir: string,
  name: string,
  ca: string,
  subject: string,
  extensions?: string,
): Promise<void> {
  await openssl(dir, [
    "req",
    "-new",
    ...EC,
    "-keyout",
    `${name}.key`,
    "-out",
    `${name}.csr`,
    "-subj",
    subject,
  ]);
  if (extensions !== undefined) await Deno.writeTextFile(join(dir, `${name}.ext`), extensions);
  await openssl(dir, [
    "x509",
    "-req",
    "-in",
    `${name}.csr`,
    "-CA",
    `${ca}.crt`,
    "-CAkey",
    `${ca}.key`,
    "-CAcreateserial",
    "-out",
    `${name}.crt`,
    "-days",
    "2",
    "-sha256",
    ...(extensions === undefined ? [] : ["-extfile", `${name}.ext`]),
  ]);
}

const LEAF = "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n";

/** The `[server.tls]` table of a server that serves `pki`'s server certificate and checks client
 * certificates against its CA. */
export function tlsTable(pki: Pki, clientAuth: "optional" | "required"): string {
  return `[server.tls]
server_certificate_bundle = ${JSON.stringify(pki.serverCert)}
server_private_key = ${JSON.stringify(pki.serverKey)}
client_ca_bundle = ${JSON.stringify(pki.caCert)}
client_auth = "${clientAuth}"
`;
}

/** Writes a fresh PKI into `dir` (which must exist) and returns the file paths. */
export async function makePki(dir: string): Promise<Pki> {
  await makeCa(dir, "ca", "/CN=Wharf Test CA");
  await makeCa(dir, "other-ca", "/CN=Other Test CA");
  await makeLeaf(
    dir,
    "server",
    "ca",
    "/CN=localhost",
    LEAF + "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
  );
  await makeLeaf(
    dir,
    "client",
    "ca",
    "/CN=alice/O=Acme/O=Acme Labs/OU=ops",
    LEAF + "extendedKeyUsage=clientAuth\n",
  );
  await makeLeaf(
    dir,
    "other-client",
    "other-ca",
    "/CN=mallory/O=Acme/OU=ops",
    LEAF + "extendedKeyUsage=clientAuth\n",
  );
  return {
    caCert: join(dir, "ca.crt"),
    serverCert: join(dir, "server.crt"),
    serverKey: join(dir, "server.key"),
    clientCert: join(dir, "client.crt"),
    clientKey: join(dir, "client.key"),
    otherCaCert: join(dir, "other-ca.crt"),
    otherClientCert: join(dir, "other-client.crt"),
    otherClientKey: join(dir, "other-client.key"),
  };
}

/**
 * Another client certificate signed by `pki`'s CA, written into `dir` as `<name>.crt`/`.key`.
 * `v1`: made by `openssl x509 -req` without extensions, which gives an X.509 v1 certificate (as
 * older CAs issue); otherwise a v3 one with extendedKeyUsage=clientAuth like the others.
 */
export async function makeClientCert(
  dir: string,
  pki: Pki,
  name: string,
  subject: string,
  opts: { v1?: boolean } = {},
): Promise<{ cert: string; key: string }> {
  const ca = pki.caCert.replace(/\.crt$/, "");
  await makeLeaf(
    dir,
    name,
    ca,
    subject,
    opts.v1 ? undefined : LEAF + "extendedKeyUsage=clientAuth\n",
  );
  return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
}
