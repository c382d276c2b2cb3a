// The scan plan in a sandbox process (docs/design.md, "Untrusted content"): no file, network or
// environment access but reading the listing files it is given. The scan job lets it read the
// image's layer listings from the store's disk, or streams them on its input (listing_frames.ts)
// from a store without one; it prints which files the report should read (scan_plan.ts).
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import { type ListedEntry, listingLines } from "../index/mod.ts";
import { decodeListings } from "./listing_frames.ts";
import { planImage } from "./scan_plan.ts";

export interface PlanArgs {
  layers: number;
  maxPackages: number;
  /**
   * The listing files (lowest layer first; null: none), when the child may read them from the
   * store's disk; absent: they come framed on the input.
   */
  paths?: (string | null)[];
}

async function* fileEntries(path: string | null): AsyncGenerator<ListedEntry> {
  if (path === null) return;
  const f = await Deno.open(path, { read: true });
  for await (const l of listingLines(f.readable)) yield l.entry;
}

if (import.meta.main) {
  await childMain(async () => {
    const { layers, maxPackages, paths } = childArgs<PlanArgs>();
    return await planImage(
      paths ? paths.map((p) => () => fileEntries(p)) : decodeListings(childInput(), layers),
      maxPackages,
    );
  });
}
