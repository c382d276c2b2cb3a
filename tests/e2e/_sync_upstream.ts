// What the scheduled-sync tests put upstream: content pushed to a real docker-registry over
// the distribution API, and an HTTP proxy in front of it that counts requests and can answer
// in its place (429 with Retry-After, `ratelimit-remaining`, garbage tag lists).
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { TestServer } from "../helpers/server.ts";

const enc = new TextEncoder();

export function sha256(b: Uint8Array): string {
  return `sha256:${createHash("sha256").update(b).digest("hex")}`;
}

export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

export const MANIFEST_ACCEPT = [OCI_INDEX, OCI_MANIFEST].join(", ");

/** Pushes a blob (POST, then PUT of the whole body) unless the registry has it. */
export async function pushBlob(url: string, name: string, data: Uint8Array): Promise<string> {
  const digest = sha256(data);
  const head = await fetch(`${url}/v2/${name}/blobs/${digest}`, { method: "HEAD" });
  await head.body?.cancel();
  if (head.status === 200) return digest;
  const start = await fetch(`${url}/v2/${name}/blobs/uploads/`, { method: "POST" });
  await start.body?.cancel();
  if (start.status !== 202) throw new Error(`POST upload ${name}: ${start.status}`);
  const loc = new URL(start.headers.get("location")!, url);
  loc.searchParams.set("digest", digest);
  const put = await fetch(loc, {
    method: "PUT",
    body: data as BodyInit,
    headers: { "content-type": "application/octet-stream" },
  });
  await put.body?.cancel();
  if (put.status !== 201) throw new Error(`PUT blob ${name}: ${put.status}`);
  return digest;
}

export async function pushManifest(
  url: string,
  name: string,
  ref: string,
  body: Uint8Array,
  mediaType: string,
): Promise<string> {
  const r = await fetch(`${url}/v2/${name}/manifests/${ref}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": mediaType },
  });
  const text = await r.text();
  if (r.status !== 201) throw new Error(`PUT manifest ${name}:${ref}: ${r.status} ${text}`);
  return sha256(body);
}

export interface PushedImage {
  digest: string;
  body: Uint8Array;
  blobs: Map<string, Uint8Array>;
}

/** An image of `layers` layers (distinct bytes per label) and its config, pushed by digest. */
export async function pushImage(
  url: string,
  name: string,
  label: string,
  arch: string,
  layers: Uint8Array[],
  ref?: string,
): Promise<PushedImage> {
  const blobs = new Map<string, Uint8Array>();
  const config = enc.encode(JSON.stringify({ architecture: arch, os: "linux", label }));
  const cd = await pushBlob(url, name, config);
  blobs.set(cd, config);
  const descs = [];
  for (const l of layers) {
    const d = await pushBlob(url, name, l);
    blobs.set(d, l);
    descs.push({ mediaType: OCI_LAYER, digest: d, size: l.length });
  }
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: cd, size: config.length },
    layers: descs,
  }));
  const digest = await pushManifest(url, name, ref ?? sha256(body), body, OCI_MANIFEST);
  return { digest, body, blobs };
}

/** A two-platform index over `amd64` and `arm64`, tagged `tag`. */
export async function pushIndex(
  url: string,
  name: string,
  tag: string,
  amd64: PushedImage,
  arm64: PushedImage,
): Promise<{ digest: string; body: Uint8Array }> {
  const body = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_INDEX,
    manifests: [
      {
        mediaType: OCI_MANIFEST,
        digest: amd64.digest,
        size: amd64.body.length,
        platform: { os: "linux", architecture: "amd64" },
      },
      {
        mediaType: OCI_MANIFEST,
        digest: arm64.digest,
        size: arm64.body.length,
        platform: { os: "linux", architecture: "arm64", variant: "v8" },
      },
    ],
    annotations: { "org.example.tag": tag },
  }));
  return { digest: await pushManifest(url, name, tag, body, OCI_INDEX), body };
}

export interface Seen {
  method: string;
  path: string;
  at: number;
}

/** An answer in the registry's place: return null to pass the request through. */
export type Override = (req: Request, path: string) => Response | Promise<Response> | null;

/** An HTTP proxy on 127.0.0.1 in front of `target`, counting what passes. */
export class UpstreamProxy {
  readonly seen: Seen[] = [];
  override: Override | null = null;
  /** headers added to every tag list answer that passes through */
  tagHeaders: Record<string, string> = {};
  private readonly server: Deno.HttpServer<Deno.NetAddr>;

  constructor(private readonly target: string) {
    this.server = Deno.serve(
      { hostname: "127.0.0.1", port: 0, onListen() {} },
      (req) => this.handle(req),
    );
  }

  get url(): string {
    return `http://127.0.0.1:${this.server.addr.port}`;
  }

  count(method: string | null, path: RegExp): number {
    return this.seen.filter((s) => (method === null || s.method === method) && path.test(s.path))
      .length;
  }

  async close(): Promise<void> {
    await this.server.shutdown();
  }

  private async handle(req: Request): Promise<Response> {
    const u = new URL(req.url);
    this.seen.push({ method: req.method, path: u.pathname, at: Date.now() });
    const own = this.override?.(req, u.pathname);
    if (own) return await own;
    const headers = new Headers(req.headers);
    headers.delete("host");
    const r = await fetch(`${this.target}${u.pathname}${u.search}`, {
      method: req.method,
      headers,
      body: req.body,
      redirect: "manual",
    });
    const out = new Headers(r.headers);
    if (u.pathname.endsWith("/tags/list")) {
      for (const [k, v] of Object.entries(this.tagHeaders)) out.set(k, v);
    }
    return new Response(req.method === "HEAD" ? null : r.body, {
      status: r.status,
      headers: out,
    });
  }
}

// ---- the upstream content of the sync tests ----

export const NAME = "team/app";
export const SELECTED = Array.from({ length: 10 }, (_, i) => `v1.${i}`);
export const OTHERS = [
  ...Array.from({ length: 10 }, (_, i) => `dev-${i}`),
  ...Array.from({ length: 10 }, (_, i) => `v2.${i}`),
];

export function config(upstream: string, sync: string): string {
  return `
[global.job_queue]
poll_interval_ms = 50
lease_secs = 10

[repository."hub"]

[[repository."hub".upstream]]
url = "${upstream}"
connect_timeout_secs = 10
read_timeout_secs = 30

[[repository."hub".sync]]
namespaces = ["${NAME}"]
tags = ['v1\\.\\d']
platforms = ["linux/amd64"]
interval_secs = 86400
${sync}
`;
}

export interface Upstream {
  amd64: PushedImage;
  arm64: PushedImage;
  indexes: Map<string, { digest: string; body: Uint8Array }>;
  others: Map<string, PushedImage>;
}

/** 30 tags: v1.0–v1.9 (selected) and v2.x, dev-x are two-platform indexes or plain images. */
export async function populate(url: string): Promise<Upstream> {
  const amd64 = await pushImage(url, NAME, "amd64", "amd64", [
    enc.encode(`amd64 layer a ${crypto.randomUUID()}`),
    enc.encode(`amd64 layer b ${crypto.randomUUID()}`),
  ]);
  const arm64 = await pushImage(url, NAME, "arm64", "arm64", [
    enc.encode(`arm64 layer ${crypto.randomUUID()}`),
  ]);
  const indexes = new Map<string, { digest: string; body: Uint8Array }>();
  for (const t of [...SELECTED, ...OTHERS.filter((t) => t.startsWith("v2."))]) {
    indexes.set(t, await pushIndex(url, NAME, t, amd64, arm64));
  }
  const others = new Map<string, PushedImage>();
  for (const t of OTHERS.filter((t) => t.startsWith("dev-"))) {
    others.set(t, await pushImage(url, NAME, t, "amd64", [enc.encode(`dev ${t}`)], t));
  }
  return { amd64, arm64, indexes, others };
}

export async function until(
  what: string,
  cond: () => Promise<boolean>,
  ms = 60_000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function localTags(s: TestServer): Promise<string[]> {
  const r = await fetch(`${s.url}/v2/hub/${NAME}/tags/list`);
  if (r.status === 404) {
    await r.body?.cancel();
    return [];
  }
  assert.equal(r.status, 200);
  return ((await r.json()).tags ?? []).sort();
}
