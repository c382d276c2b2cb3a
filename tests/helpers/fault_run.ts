// The fault run's traffic (issue 38 item 4): clients pushing blobs (whole or in chunks) and images
// and pulling what was acknowledged, throughout, while faults come and go; a ledger of what each
// client was told, and the figures the run reports. What it holds a server to:
// - every push answered 201 is pullable afterwards with its bytes (0 acknowledged writes lost);
// - every pulled body hashes to the digest it was served under (0 corrupted bytes served);
// - every error answer carries an OCI body with a non-empty detail (every error has a cause),
//   and a 5xx is PROVIDER_UNAVAILABLE or RECLAMATION_IN_PROGRESS (SPEC §Errors);
// - after a fault ends, pushes succeed again within seconds (the recovery time).
import { createHash } from "node:crypto";
import type { TestServer } from "./server.ts";

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

/** A request's answer, or why none came. */
const TIMEOUT_MS = 30_000;

export interface Blob {
  digest: string;
  bytes: Uint8Array;
}

/**
 * Blobs the clients push, drawn from a fixed pool so a run's disk use is bounded however long it
 * runs (a blob pushed again into another namespace is stored once).
 */
export function blobPool(n: number, maxBytes: number): Blob[] {
  const out: Blob[] = [];
  for (let i = 0; i < n; i++) {
    const size = 1024 + Math.floor(Math.random() ** 2 * maxBytes);
    const bytes = new Uint8Array(size);
    for (let o = 0; o < size; o += 65536) {
      crypto.getRandomValues(bytes.subarray(o, Math.min(size, o + 65536)));
    }
    out.push({ digest: `sha256:${createHash("sha256").update(bytes).digest("hex")}`, bytes });
  }
  return out;
}

export class FaultLedger {
  pushes = 0;
  acked = new Map<string, string>(); // `${ns}@${digest}` → ns
  images = new Map<string, string>(); // `${ns}:${tag}` → manifest digest
  refused = new Map<string, number>(); // `${status} ${code}` of error answers
  /** error answers without an OCI body and a non-empty detail */
  noCause: string[] = [];
  /** 5xx answers with a code SPEC does not allow for 5xx */
  badCode: string[] = [];
  /** requests that got no answer (connection dropped, timeout) */
  transport: string[] = [];
  pulls = 0;
  pulledOk = 0;
  corrupt: string[] = [];
  /** answers seen by time, for the recovery figures: [ms, ok] of each push */
  pushTimes: [number, boolean][] = [];
  /** one line per distinct error detail, for the report */
  details = new Map<string, number>();
  /** digests whose stored bytes the run changed on disk (bit rot) */
  rotten = new Set<string>();
  /** answers refusing a rotten digest as such: never its bytes (500 mismatch, 404 quarantined) */
  rotRefused = 0;
  /** rotten digests pushed again after the run and then served whole */
  restored = 0;

  /** Records an error answer; the body is read here. */
  async error(what: string, r: Response): Promise<void> {
    const text = await r.text().catch(() => "");
    let code = "?";
    let detail = "";
    try {
      const e = JSON.parse(text).errors[0];
      code = String(e.code);
      detail = typeof e.detail === "string" ? e.detail : "";
    } catch { /* not an OCI body */ }
    const k = `${r.status} ${code}`;
    this.refused.set(k, (this.refused.get(k) ?? 0) + 1);
    if (detail.trim() === "") this.noCause.push(`${what}: ${r.status} ${text.slice(0, 200)}`);
    if (
      r.status >= 500 && code !== "PROVIDER_UNAVAILABLE" && code !== "RECLAMATION_IN_PROGRESS"
    ) this.badCode.push(`${what}: ${r.status} ${text.slice(0, 200)}`);
    const shape = detail.replace(/[0-9a-f]{8}-[0-9a-f-]{27}|sha256:[0-9a-f]{64}|\d+/g, "#")
      .slice(0, 160);
    this.details.set(shape, (this.details.get(shape) ?? 0) + 1);
  }
}

/** fetch with a bound: no answer within TIMEOUT_MS is a transport failure, as a reset is. */
async function call(
  ledger: FaultLedger,
  what: string,
  url: string,
  init: RequestInit = {},
): Promise<Response | null> {
  try {
    return await fetch(url, { ...init, signal: AbortSignal.timeout(TIMEOUT_MS) });
  } catch (e) {
    ledger.transport.push(`${what}: ${(e as Error).message}`);
    return null;
  }
}

async function pushBlob(s: TestServer, l: FaultLedger, ns: string, b: Blob): Promise<boolean> {
  l.pushes++;
  const t = Date.now();
  let ok = false;
  if (Math.random() < 0.5) {
    const r = await call(l, "push", `${s.url}/v2/${ns}/blobs/uploads/?digest=${b.digest}`, {
      method: "POST",
      body: b.bytes as BodyInit,
    });
    if (r?.status === 201) {
      await r.body?.cancel();
      ok = true;
    } else if (r) await l.error("monolithic push", r);
  } else {
    ok = await chunked(s, l, ns, b);
  }
  l.pushTimes.push([t, ok]);
  if (ok) l.acked.set(`${ns}@${b.digest}`, ns);
  return ok;
}

/** POST, a PATCH of the first half, a PUT with the rest: the session's three steps. */
async function chunked(s: TestServer, l: FaultLedger, ns: string, b: Blob): Promise<boolean> {
  const post = await call(l, "post", `${s.url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  if (!post) return false;
  if (post.status !== 202) {
    await l.error("session start", post);
    return false;
  }
  await post.body?.cancel();
  const loc = new URL(post.headers.get("location")!, s.url).href;
  const half = b.bytes.length >> 1;
  const patch = await call(l, "patch", loc, {
    method: "PATCH",
    body: b.bytes.subarray(0, half) as BodyInit,
    headers: { "content-range": `0-${half - 1}` },
  });
  if (!patch) return false;
  if (patch.status !== 202) {
    await l.error("patch", patch);
    return false;
  }
  await patch.body?.cancel();
  const sep = loc.includes("?") ? "&" : "?";
  const put = await call(l, "put", `${loc}${sep}digest=${b.digest}`, {
    method: "PUT",
    body: b.bytes.subarray(half) as BodyInit,
    headers: { "content-range": `${half}-${b.bytes.length - 1}` },
  });
  if (!put) return false;
  if (put.status !== 201) {
    await l.error("completing put", put);
    return false;
  }
  await put.body?.cancel();
  return true;
}

async function pushImage(
  s: TestServer,
  l: FaultLedger,
  ns: string,
  tag: string,
  config: Blob,
  layer: Blob,
): Promise<void> {
  if (!(await pushBlob(s, l, ns, config)) || !(await pushBlob(s, l, ns, layer))) return;
  const body = new TextEncoder().encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: config.digest, size: config.bytes.length },
    layers: [{ mediaType: OCI_LAYER, digest: layer.digest, size: layer.bytes.length }],
  }));
  l.pushes++;
  const t = Date.now();
  const r = await call(l, "manifest", `${s.url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": OCI_MANIFEST },
  });
  const ok = r?.status === 201;
  l.pushTimes.push([t, ok]);
  if (ok) {
    await r!.body?.cancel();
    l.images.set(`${ns}:${tag}`, `sha256:${createHash("sha256").update(body).digest("hex")}`);
  } else if (r) await l.error("manifest put", r);
}

/** GETs an acknowledged blob and checks its bytes against the digest it is served under. */
async function pull(s: TestServer, l: FaultLedger, key: string): Promise<void> {
  const [ns, digest] = key.split("@");
  l.pulls++;
  const r = await call(l, "pull", `${s.url}/v2/${ns}/blobs/${digest}`, {
    headers: { "x-svc-no-redirect": "1" },
  });
  if (!r) return;
  if (r.status !== 200 && l.rotten.has(digest) && await refusesRot(r)) {
    l.rotRefused++;
    return;
  }
  if (r.status !== 200) return await l.error("pull", r);
  const h = createHash("sha256");
  try {
    for await (const c of r.body!) h.update(c);
  } catch (e) {
    l.transport.push(`pull body: ${(e as Error).message}`);
    return;
  }
  if (`sha256:${h.digest("hex")}` === digest) l.pulledOk++;
  else l.corrupt.push(`${ns} ${digest}`);
}

/**
 * Whether `r` refuses a digest whose stored bytes rotted as Wharf documents it: 500 naming the
 * mismatch at the read that finds it, then 404 BLOB_UNKNOWN (saying it was quarantined, until a
 * push of it in some namespace restores the bytes and a verify pass drops the record: a namespace
 * whose link the quarantine took then answers a plain BLOB_UNKNOWN, and its client pushes again).
 */
async function refusesRot(r: Response): Promise<boolean> {
  const text = await r.clone().text().catch(() => "");
  let e: { code?: string; detail?: string } = {};
  try {
    e = JSON.parse(text).errors[0];
  } catch { /* not an OCI body */ }
  const ok =
    (r.status === 500 && e.code === "INTERNAL_ERROR" && /do not match/.test(e.detail ?? "")) ||
    (r.status === 404 && e.code === "BLOB_UNKNOWN" && (e.detail ?? "") !== "");
  if (ok) await r.body?.cancel();
  return ok;
}

/** One client until `until` (ms): pushes blobs and images, pulls what was acknowledged. */
export async function client(
  s: TestServer,
  l: FaultLedger,
  id: number,
  pool: Blob[],
  until: number,
): Promise<void> {
  let n = 0;
  while (Date.now() < until) {
    const ns = `run/c${id}/r${n % 5}`;
    const pick = () => pool[Math.floor(Math.random() * pool.length)];
    const roll = Math.random();
    if (roll < 0.45) await pushBlob(s, l, ns, pick());
    else if (roll < 0.6) await pushImage(s, l, ns, `t${n}`, pick(), pick());
    else if (l.acked.size > 0) {
      const keys = [...l.acked.keys()];
      await pull(s, l, keys[Math.floor(Math.random() * keys.length)]);
    }
    n++;
  }
}

/**
 * After the run: every acknowledged blob and image is there, whole. A blob whose stored bytes the
 * run rotted is refused as such (never served), then pushed again and served whole.
 */
export async function verifyAcked(
  s: TestServer,
  l: FaultLedger,
  pool: Blob[] = [],
): Promise<string[]> {
  const lost: string[] = [];
  for (const key of l.acked.keys()) {
    const [ns, digest] = key.split("@");
    if (l.rotten.has(digest)) {
      const [refused, whole] = [l.rotRefused, l.pulledOk];
      await pull(s, l, key);
      // Pushed again during the run (its client got a 404 and uploaded it): served whole.
      if (l.pulledOk > whole) continue;
      if (l.rotRefused === refused) lost.push(`${key} (rotten, not refused as such)`);
      const blob = pool.find((b) => b.digest === digest);
      // A refusal with its cause (the free-space reserve, read again at most once a second) is
      // answered "retry later": the client does.
      let pushed = false;
      for (let i = 0; blob && !pushed && i < 5; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 500));
        pushed = await pushBlob(s, l, ns, blob);
      }
      if (!pushed) {
        lost.push(`${key} (rotten, could not be pushed again)`);
        continue;
      }
      const ok = l.pulledOk;
      await pull(s, l, key);
      if (l.pulledOk === ok) lost.push(`${key} (rotten, pushed again, not served whole)`);
      else l.restored++;
      continue;
    }
    const before = l.corrupt.length;
    const pulled = l.pulledOk;
    await pull(s, l, key);
    if (l.pulledOk === pulled && l.corrupt.length === before) lost.push(key);
  }
  for (const [ref, digest] of l.images) {
    const [ns, tag] = ref.split(":");
    const r = await fetch(`${s.url}/v2/${ns}/manifests/${tag}`, {
      headers: { accept: OCI_MANIFEST },
    });
    await r.body?.cancel();
    if (r.status !== 200 || r.headers.get("docker-content-digest") !== digest) {
      lost.push(`${ref} (${r.status} ${r.headers.get("docker-content-digest")})`);
    }
  }
  return lost;
}

/** Milliseconds from `since` to the first push that succeeded at or after it (null: none). */
export function recoveredAfter(l: FaultLedger, since: number): number | null {
  let best: number | null = null;
  for (const [t, ok] of l.pushTimes) {
    if (ok && t >= since && (best === null || t < best)) best = t;
  }
  return best === null ? null : best - since;
}

/** Polls /readyz every `everyMs`; the transitions it saw, as [ms, ready]. */
export function watchReadiness(s: TestServer, everyMs = 200) {
  const seen: [number, boolean][] = [];
  let stop = false;
  const done = (async () => {
    while (!stop) {
      try {
        const r = await fetch(`${s.url}/readyz`, { signal: AbortSignal.timeout(5000) });
        await r.body?.cancel();
        const ready = r.status === 200;
        if (seen.length === 0 || seen.at(-1)![1] !== ready) seen.push([Date.now(), ready]);
      } catch { /* counted by the clients */ }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    seen,
    /** ms from `since` until /readyz was 200 again (null: not seen) */
    readyAfter(since: number): number | null {
      let ready: boolean | null = null;
      for (const [t, r] of seen) {
        if (t <= since) ready = r;
        else if (r) return ready ? 0 : t - since;
      }
      return ready ? 0 : null;
    },
    /** whether /readyz said not_ready at some moment between `from` and `to` */
    notReadyBetween(from: number, to: number): boolean {
      let ready = true; // the state at `from`
      for (const [t, r] of seen) {
        if (t > to) break;
        if (t <= from) ready = r;
        else if (!r) return true;
      }
      return !ready;
    },
    async stop() {
      stop = true;
      await done;
    },
  };
}
