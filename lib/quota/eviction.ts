// The order a size-capped pull-through cache gives up its images (issue 26, part 2): least
// recently pulled first; an image never pulled counts from when it was fetched.
export interface CachedImage {
  ns: string;
  digest: string;
  size: number;
  /** ms since epoch of its newest pull, null when none was recorded */
  lastPulled: number | null;
  fetchedAt: number;
}

/** Images to evict, oldest use first, skipping `protect`ed ones (`ns\0digest`). */
export function evictionOrder(images: CachedImage[], protect: ReadonlySet<string>): CachedImage[] {
  const used = (i: CachedImage) => i.lastPulled ?? i.fetchedAt;
  return images.filter((i) => !protect.has(`${i.ns}\0${i.digest}`))
    .sort((a, b) => used(a) - used(b) || (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
}
