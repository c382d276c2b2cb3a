// Whether a Bearer realm may see the upstream's configured password (DESIGN.md §Pull-through):
// an upstream can name any URL as its token realm, so the password goes only to a realm on
// the upstream's own registrable domain (auth.docker.io for registry-1.docker.io).
//
// tldts is loaded on the first realm that differs from its upstream's host: its public suffix
// list costs a process ~15 MiB of RSS (measured: 37.7 -> 52.7 MiB on import), which every
// server without such an upstream would carry for nothing.
type Tldts = typeof import("tldts");
let tldts: Promise<Tldts> | null = null;
const loadTldts = () => tldts ??= import("tldts");

function host(u: URL): string {
  return u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

/**
 * The registrable domain of `hostname`, or null for IP addresses and names without one
 * (`localhost`, bare public suffixes). Private suffixes count (`github.io`, `s3.amazonaws.com`):
 * two tenants of one hosting provider are two owners.
 */
function registrableDomain(t: Tldts, hostname: string): string | null {
  return t.getDomain(hostname, { allowPrivateDomains: true });
}

export async function mayReceiveCredentials(realm: URL, upstream: URL): Promise<boolean> {
  // Never downgrade: a password meant for TLS does not go out in clear text.
  if (upstream.protocol === "https:" && realm.protocol !== "https:") return false;
  const a = host(realm);
  const b = host(upstream);
  if (a === b) return true;
  const t = await loadTldts();
  const da = registrableDomain(t, a);
  return da !== null && da === registrableDomain(t, b);
}
