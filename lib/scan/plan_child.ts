// The scan plan in a sandbox process (docs/design.md, "Untrusted content"): no file, network or
// environment access but reading the listing files it is given. It gets one image's layer
// listings (listing_frames.ts) and prints which files the report should read (scan_plan.ts).
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import { type ListingsInput, openListings } from "./listing_frames.ts";
import { planImage } from "./scan_plan.ts";

export interface PlanArgs {
  /** one group: the image's layers */
  listings: ListingsInput;
  maxPackages: number;
}

/** The parse: run by childMain in a process, a worker, or through main.ts's sandbox entry. */
export async function main(): Promise<unknown> {
  const { listings, maxPackages } = childArgs<PlanArgs>();
  return await planImage(openListings(listings, childInput)[0], maxPackages);
}

if (import.meta.main) await childMain(main);
