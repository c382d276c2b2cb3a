// The web UI's files (SPEC §Web UI routes): with `[ui] enabled`, every GET or HEAD outside
// `/v2/…`, `/healthz`, `/readyz`, `/metrics` and `/token` serves the bundle in ui/dist/, falling
// back to its index document for paths that name no bundled file (the app routes them itself).
// The bundle is small and read once; hashed assets are cached for a year, the index never.
//
// With the UI off, a browser asking for such a path (its Accept names text/html) gets a page
// saying so and which key turns it on: a first config that only moves the port otherwise turns
// the UI a newcomer just saw into a JSON error. It is decided as `ui-asset` (it is the answer
// the UI's own action gives while off), so a policy refusing the UI refuses it too; API clients
// keep their OCI error.
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

/**
 * The UI's action for a request no API route took, or null when it is not a read, or the UI is
 * off and the client is not a browser (`accept`, its Accept header, names no text/html).
 */
export function uiAction(
  enabled: boolean,
  method: string,
  path: string,
  accept: string | null = null,
): Action | null {
  if (method !== "GET" && method !== "HEAD") return null;
  if (path === "/v2" || path.startsWith("/v2/")) return null;
  if (!enabled && !acceptsHtml(accept)) return null;
  return { name: "ui-asset" };
}

/** Whether an Accept header names text/html (with a q above 0): a browser's navigation does. */
export function acceptsHtml(accept: string | null): boolean {
  if (!accept) return false;
  return accept.split(",").some((range) => {
    const [type, ...params] = range.split(";").map((p) => p.trim().toLowerCase());
    if (type !== "text/html") return false;
    const q = params.find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/** The one sentence a browser gets for a UI path while the UI is off. */
export const UI_OFF_SENTENCE =
  "The web UI is off: set [ui] enabled = true in Wharf's config file to turn it on.";

const UI_OFF_PAGE = new TextEncoder().encode(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Wharf: web UI off</title>
</head>
<body>
<p>${
  UI_OFF_SENTENCE.replace("[ui] enabled = true", "<code>[ui] enabled = true</code>").replace(
    "'",
    "&#39;",
  )
}</p>
</body>
</html>
`);

/**
 * 404: nothing is served at the path (a crawler or a link checker reads it as missing), and no
 * cache keeps it, so a config reload that turns the UI on is seen at once.
 */
function uiOffResponse(head: boolean): Response {
  return new Response(head ? null : UI_OFF_PAGE as BodyInit, {
    status: 404,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-length": String(UI_OFF_PAGE.length),
      "cache-control": "no-store",
      "content-security-policy": "default-src 'none'",
      "x-content-type-options": "nosniff",
    },
  });
}

export async function uiHandler({ req, url, head, registry }: RequestScope): Promise<Response> {
  if (!registry.cfg.ui.enabled) return uiOffResponse(head);
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
