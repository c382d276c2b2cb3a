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

/** When `image` was last used: its newest pull stamp, or its fetch when that is newer. */
export function lastUsed(image: CachedImage): number {
  return Math.max(image.lastPulled ?? 0, image.fetchedAt);
}

/**
 * Images to evict, oldest use first, skipping `protect`ed ones (`ns\0digest`) and, when
 * `inUseSince` is given, every image used at or after it: a pull stamp is also a lease that some
 * process (this one or another on the same KV) is serving or filling the image.
 */
export function evictionOrder(
  images: CachedImage[],
  protect: ReadonlySet<string>,
  inUseSince = Infinity,
): CachedImage[] {
  const used = (i: CachedImage) => i.lastPulled ?? i.fetchedAt;
  return images.filter((i) => !protect.has(`${i.ns}\0${i.digest}`) && lastUsed(i) < inUseSince)
    .sort((a, b) => used(a) - used(b) || (a.ns < b.ns ? -1 : a.ns > b.ns ? 1 : 0));
}
