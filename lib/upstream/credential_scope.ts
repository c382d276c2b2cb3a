// Whether a Bearer realm may see the upstream's configured password (DESIGN.md §Pull-through):
// an upstream can name any URL as its token realm, so the password goes only to a realm on
// the upstream's own registrable domain (auth.docker.io for registry-1.docker.io).
import { getDomain } from "tldts";

function host(u: URL): string {
  return u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
}

/**
 * The registrable domain of `hostname`, or null for IP addresses and names without one
 * (`localhost`, bare public suffixes). Private suffixes count (`github.io`, `s3.amazonaws.com`):
 * two tenants of one hosting provider are two owners.
 */
function registrableDomain(hostname: string): string | null {
  return getDomain(hostname, { allowPrivateDomains: true });
}

export function mayReceiveCredentials(realm: URL, upstream: URL): boolean {
  // Never downgrade: a password meant for TLS does not go out in clear text.
  if (upstream.protocol === "https:" && realm.protocol !== "https:") return false;
  const a = host(realm);
  const b = host(upstream);
  if (a === b) return true;
  const da = registrableDomain(a);
  return da !== null && da === registrableDomain(b);
}
