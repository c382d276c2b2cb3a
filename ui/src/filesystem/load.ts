// Fetching the layers' listings for the explorer. A layer not indexed yet answers 202
// `{status:"indexing"}` (SPEC §Layer entries 1); it is asked again every second until 200, and the
// tab says which layers are still being indexed meanwhile.
import { apiFetch, checked, nsPath } from "../api.ts";
import type { LayerListing } from "./model.ts";
import { readListing } from "./listing_stream.ts";

export const POLL_MS = 1000;

export function layerUrl(
  namespace: string,
  digest: string,
  what: "entries" | "file" | "details",
) {
  return `/v2/${nsPath(namespace)}/_svc/layers/${digest}/${what}`;
}

export function fileUrl(
  namespace: string,
  digest: string,
  path: string,
  download = false,
) {
  return `${layerUrl(namespace, digest, "file")}?path=${encodeURIComponent(path)}${
    download ? "&download" : ""
  }`;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });

/**
 * Every layer's listing, in order. `onIndexing` hears the 0-based layers still answering 202
 * after each round (an empty list once all are in).
 */
export async function loadListings(
  namespace: string,
  digests: string[],
  signal: AbortSignal,
  onIndexing: (layers: number[]) => void,
): Promise<LayerListing[]> {
  const out: (LayerListing | null)[] = digests.map(() => null);
  for (;;) {
    const waiting: number[] = [];
    await Promise.all(digests.map(async (d, i) => {
      if (out[i]) return;
      const r = await checked(
        await apiFetch(layerUrl(namespace, d, "entries"), {
          headers: { accept: "application/json" },
          signal,
        }),
      );
      if (r.status === 202) {
        await r.body?.cancel();
        waiting.push(i);
      } else {
        const t0 = performance.now();
        out[i] = await readListing(r.body!);
        performance.measure("wharf-fs-parse", { start: t0, end: performance.now() });
      }
    }));
    onIndexing(waiting.sort((a, b) => a - b));
    if (waiting.length === 0) return out as LayerListing[];
    await sleep(POLL_MS, signal);
  }
}
