// An image diff in a sandbox process (docs/design.md, "Untrusted content"): both images' layer
// listings merged and compared (image_diff.ts) with no file, network or environment access but
// reading the listing files it is given (listing_frames.ts). A diff of two 300,000-entry images
// held both trees, ~100 MiB and a second of CPU, in the serving process.
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import { type ListingsInput, openListings } from "./listing_frames.ts";
import { mergeLayers } from "./merged_fs.ts";
import { diffImages, type SideInfo } from "./image_diff.ts";

export interface DiffArgs {
  /** two groups: the layers of `from`, then of `to` */
  listings: ListingsInput;
  /** each image's digest, layers and the layers not fully indexed */
  sides: SideInfo[];
  limit: number;
}

/** The parse: run by childMain in a process, a worker, or through main.ts's sandbox entry. */
export async function main(): Promise<unknown> {
  const { listings, sides, limit } = childArgs<DiffArgs>();
  const groups = openListings(listings, childInput);
  // One after the other: framed listings come in that order.
  const from = await mergeLayers(groups[0]);
  const to = await mergeLayers(groups[1]);
  return diffImages({ ...sides[0], merged: from }, { ...sides[1], merged: to }, limit);
}

if (import.meta.main) await childMain(main);
