// Which namespaces and tags a sync entry selects, and which platforms of an index it fetches.
import type { RepositoryConfig, SyncConfig } from "../config/mod.ts";
import type { Platform } from "../oci/mod.ts";
import { upstreamName } from "../upstream/mod.ts";

/** The local namespace of upstream namespace `upstream` (as the first upstream names it). */
export function localNamespace(rc: RepositoryConfig, upstream: string): string | null {
  const url = rc.upstreams![0].url;
  const prefix = new URL(url).pathname.replace(/^\/+|\/+$/g, "");
  let rest = upstream;
  if (prefix !== "") {
    if (!upstream.startsWith(prefix + "/")) return null;
    rest = upstream.slice(prefix.length + 1);
  }
  // Docker Hub's `library/x` is what clients pull as `x`: warm the name they will ask for.
  const short = rest.startsWith("library/") ? `${rc.name}/${rest.slice(8)}` : null;
  if (short && upstreamName(rc.name, short, url) === upstream) return short;
  const ns = `${rc.name}/${rest}`;
  return upstreamName(rc.name, ns, url) === upstream ? ns : null;
}

export function matchesPlatform(p: Platform | undefined, wanted: string[] | null): boolean {
  if (wanted === null) return true;
  if (!p) return false;
  return wanted.some((w) => {
    const [os, arch, variant] = w.split("/");
    return os === p.os && arch === p.architecture &&
      (variant === undefined || variant === p.variant);
  });
}

export function matchesTag(sync: SyncConfig, tag: string): boolean {
  return sync.tags.length === 0 || sync.tags.some((re) => re.test(tag));
}
