// The web UI's files (SPEC §Web UI routes): with `[ui] enabled`, every GET or HEAD outside
// `/v2/…`, `/healthz`, `/readyz`, `/metrics` and `/token` serves the bundle in ui/dist/, falling
// back to its index document for paths that name no bundled file (the app routes them itself).
// The bundle is small and read once; hashed assets are cached for a year, the index never.
import { lookup } from "mime-types";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Action } from "./actions.ts";
import type { RequestScope } from "./scope.ts";

const DIST = fileURLToPath(new URL("../ui/dist/", import.meta.url));

interface Asset {
  bytes: Uint8Array;
  type: string;
  etag: string;
  immutable: boolean;
}

let bundle: Promise<Map<string, Asset>> | null = null;

async function readBundle(): Promise<Map<string, Asset>> {
  const out = new Map<string, Asset>();
  const walk = async (dir: string, prefix: string) => {
    for await (const e of Deno.readDir(dir)) {
      const rel = `${prefix}${e.name}`;
      if (e.isDirectory) await walk(join(dir, e.name), `${rel}/`);
      else if (e.isFile) {
        const bytes = await Deno.readFile(join(dir, e.name));
        const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
        out.set(rel, {
          bytes,
          type: lookup(e.name) || "application/octet-stream",
          etag: `"${
            Array.from(digest.slice(0, 12), (b) => b.toString(16).padStart(2, "0")).join("")
          }"`,
          // Vite names built assets by content hash: a new build is a new URL.
          immutable: rel.startsWith("assets/"),
        });
      }
    }
  };
  await walk(DIST, "");
  if (!out.has("index.html")) throw new Error(`the web UI bundle is missing: no ${DIST}index.html`);
  return out;
}

/** The UI's action for a request no API route took, or null when the UI is off or it is not a read. */
export function uiAction(enabled: boolean, method: string, path: string): Action | null {
  if (!enabled || (method !== "GET" && method !== "HEAD")) return null;
  if (path === "/v2" || path.startsWith("/v2/")) return null;
  return { name: "ui-asset" };
}

export async function uiHandler({ req, url, head }: RequestScope): Promise<Response> {
  bundle ??= readBundle();
  const files = await bundle;
  let rel = "";
  try {
    rel = decodeURIComponent(url.pathname).replace(/^\/+/, "");
  } catch {
    // not a file name: the app shows its own "not found"
  }
  const asset = files.get(rel) ?? files.get("index.html")!;
  const headers = new Headers({
    "content-type": asset.type.startsWith("text/") || asset.type.endsWith("javascript")
      ? `${asset.type}; charset=utf-8`
      : asset.type,
    etag: asset.etag,
    "cache-control": files.get(rel)?.immutable ? "public, max-age=31536000, immutable" : "no-cache",
    "x-content-type-options": "nosniff",
  });
  if (req.headers.get("if-none-match") === asset.etag) {
    return new Response(null, { status: 304, headers });
  }
  headers.set("content-length", String(asset.bytes.length));
  return new Response(head ? null : asset.bytes as BodyInit, {
    status: 200,
    headers,
  });
}
