// Shared by the audit API tests (and the UI test): identities and a policy that refuses some
// writes, pushes as an identity, and reading the trail through GET /v2/_svc/audit.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { sha256Hex, type TestServer } from "../helpers/server.ts";
import { identityTables } from "../helpers/identities.ts";

const enc = new TextEncoder();
const PASSWORDS = { root: "root-audit-pw-1", alice: "alice-audit-pw-2", bob: "bob-audit-pw-3" };
export const basic = (u: keyof typeof PASSWORDS) => `Basic ${btoa(`${u}:${PASSWORDS[u]}`)}`;
export function identities(): Promise<string> {
  return identityTables(PASSWORDS);
}

const PULL = '["get-manifest", "get-blob", "list-tags", "get-referrers"]';

/**
 * root does anything, alice writes team/*, bob pulls; the rest is refused. /v2/ is refused to
 * anonymous callers: clients send credentials only after that ping answers 401.
 */
export const POLICY = `
[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-token"]',
  'has(identity.username) && request.action == "get-api-version"',
  'has(identity.username) && identity.username == "root"',
  'has(identity.username) && identity.username == "alice" && has(request.namespace) && request.namespace.startsWith("team/")',
  'has(identity.username) && identity.username == "bob" && request.action in ${PULL}',
]
`;

export const TOKENS = `
[auth.token_service]
secret_key = "wharf-audit-test-secret-0123456789abcdef"
realm = "http://127.0.0.1/token"
service = "wharf.test"
`;

export type Rec = Record<string, unknown> & { action: string; id: string };

export type Who = keyof typeof PASSWORDS;

export function as(who: Who, headers: Record<string, string> = {}): Record<string, string> {
  return { authorization: basic(who), ...headers };
}

export async function pushBlobAs(
  s: TestServer,
  who: Who,
  ns: string,
  data: Uint8Array,
): Promise<string> {
  const digest = `sha256:${await sha256Hex(data)}`;
  const r = await req(s, `/v2/${ns}/blobs/uploads/?digest=${digest}`, {
    method: "POST",
    body: data as BodyInit,
    headers: as(who, { "content-type": "application/octet-stream" }),
  });
  await r.body?.cancel();
  assert.equal(r.status, 201, `blob push to ${ns}`);
  return digest;
}

/** Pushes config + layer + manifest as `who`; the manifest PUT carries `requestId`. */
export async function pushImageAs(
  s: TestServer,
  who: Who,
  ns: string,
  tag: string,
  requestId?: string,
): Promise<{ digest: string; config: string; layer: string }> {
  const cfgBytes = enc.encode(JSON.stringify({ architecture: "amd64", os: "linux", tag }));
  const layerBytes = enc.encode(`layer ${ns}:${tag} ${crypto.randomUUID()}`);
  const config = await pushBlobAs(s, who, ns, cfgBytes);
  const layer = await pushBlobAs(s, who, ns, layerBytes);
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: config,
      size: cfgBytes.length,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: layer,
      size: layerBytes.length,
    }],
  }));
  const headers = as(who, { "content-type": "application/vnd.oci.image.manifest.v1+json" });
  if (requestId) headers["x-request-id"] = requestId;
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, { method: "PUT", body, headers });
  await r.body?.cancel();
  assert.equal(r.status, 201, `manifest push ${ns}:${tag}`);
  return { digest: `sha256:${await sha256Hex(body)}`, config, layer };
}

export async function audit(
  s: TestServer,
  query = "",
  who: Who | null = "root",
): Promise<{ records: Rec[]; next?: string }> {
  const r = await req(s, `/v2/_svc/audit${query}`, { headers: who ? as(who) : {} });
  const text = await r.text();
  assert.equal(r.status, 200, `audit${query}: ${text}`);
  return JSON.parse(text);
}

/** Every record matching `query`, following `next`. */
export async function auditAll(
  s: TestServer,
  query = "",
  who: Who | null = "root",
): Promise<Rec[]> {
  const out: Rec[] = [];
  let q = query;
  for (let i = 0; i < 1000; i++) {
    const page = await audit(s, q, who);
    out.push(...page.records);
    if (!page.next) return out;
    q = `${query}${query ? "&" : "?"}next=${page.next}`;
  }
  throw new Error("audit paging did not end");
}

export async function waitFor<T>(what: string, f: () => Promise<T | null>): Promise<T> {
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    const v = await f();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}
