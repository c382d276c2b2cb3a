// The scan plan in a sandbox process (docs/design.md, "Untrusted content"): no file, network or
// environment access. The scan job streams it the image's layer listings (listing_frames.ts);
// it prints which files the report should read (scan_plan.ts).
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import { decodeListings } from "./listing_frames.ts";
import { planImage } from "./scan_plan.ts";

export interface PlanArgs {
  layers: number;
  maxPackages: number;
}

if (import.meta.main) {
  await childMain(async () => {
    const { layers, maxPackages } = childArgs<PlanArgs>();
    return await planImage(decodeListings(childInput(), layers), maxPackages);
  });
}
