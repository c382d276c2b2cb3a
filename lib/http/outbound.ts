// Where an outbound request may go when its address comes from an answer rather than from the
// config: a redirect's Location, a token realm, a discovered jwks_uri (issue 22 §4). Metadata
// services on link-local addresses hand cloud credentials to whoever asks from the host, and
// loopback reaches services that trust the host, so an upstream, a downstream or an identity
// provider must not be able to point Wharf at them. The config's own URLs are trusted as
// written: their hosts pass unchecked, and loopback stays reachable when one of them is on
// loopback (a local peer or a test). `[global] outbound_allow` opens addresses on purpose.
//
// Names are resolved before the hop and every address must pass; fetch resolves again when it
// connects, so a name whose DNS answer changes in between (rebinding) is not caught here.
import { proxyConfigured } from "./http1_client.ts";

export type AddressClass = "loopback" | "link-local" | "metadata" | "unspecified";

const LABEL: Record<AddressClass, string> = {
  loopback: "a loopback address",
  "link-local": "a link-local address",
  metadata: "a cloud metadata address",
  unspecified: "an unspecified address",
};

/**
 * 4 bytes for IPv4, 16 for IPv6, null for anything else. IPv4 is read the way URL hosts are
 * (`2852039166`, `0xa9.0xfe.0xa9.0xfe`, `0251.0376.43518`) so no spelling slips past.
 */
export function parseIp(s: string): Uint8Array | null {
  let h = s.trim().toLowerCase();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  const zone = h.indexOf("%");
  if (zone >= 0) h = h.slice(0, zone);
  if (h === "" || h.length > 64) return null;
  return h.includes(":") ? parseV6(h) : parseV4(h);
}

function v4Number(p: string): number | null {
  if (/^0x[0-9a-f]*$/.test(p)) return p.length === 2 ? 0 : parseInt(p.slice(2), 16);
  if (/^0[0-7]+$/.test(p)) return parseInt(p.slice(1), 8);
  if (/^(0|[1-9][0-9]*)$/.test(p)) return Number(p);
  return null;
}

function parseV4(s: string): Uint8Array | null {
  const parts = s.split(".");
  if (parts.length > 1 && parts[parts.length - 1] === "") parts.pop();
  if (parts.length > 4) return null;
  const nums: number[] = [];
  for (const p of parts) {
    const n = v4Number(p);
    if (n === null) return null;
    nums.push(n);
  }
  const last = nums.pop()!;
  if (nums.some((n) => n > 255) || last >= 256 ** (4 - nums.length)) return null;
  let v = last;
  nums.forEach((n, i) => v += n * 256 ** (3 - i));
  return new Uint8Array([(v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255]);
}

function parseV6(s: string): Uint8Array | null {
  let head = s;
  let tail: Uint8Array | null = null;
  const lastColon = s.lastIndexOf(":");
  if (s.indexOf(".", lastColon) >= 0) {
    const parts = s.slice(lastColon + 1).split(".");
    if (parts.length !== 4 || !parts.every((p) => /^(0|[1-9][0-9]{0,2})$/.test(p))) return null;
    if (parts.some((p) => Number(p) > 255)) return null;
    tail = new Uint8Array(parts.map(Number));
    head = s.slice(0, lastColon + 1) + "0:0";
  }
  const gap = head.indexOf("::");
  if (gap !== head.lastIndexOf("::")) return null;
  const split = (x: string) => x === "" ? [] : x.split(":");
  let groups: string[];
  if (gap >= 0) {
    const left = split(head.slice(0, gap));
    const right = split(head.slice(gap + 2));
    const fill = 8 - left.length - right.length;
    if (fill < 1) return null;
    groups = [...left, ...new Array<string>(fill).fill("0"), ...right];
  } else {
    groups = head.split(":");
  }
  if (groups.length !== 8) return null;
  const out = new Uint8Array(16);
  for (const [i, g] of groups.entries()) {
    if (!/^[0-9a-f]{1,4}$/.test(g)) return null;
    const v = parseInt(g, 16);
    out[2 * i] = v >> 8;
    out[2 * i + 1] = v & 255;
  }
  if (tail) out.set(tail, 12);
  return out;
}

export function formatIp(b: Uint8Array): string {
  if (b.length === 4) return b.join(".");
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i] << 8) | b[2 * i + 1]);
  let best = -1, bestLen = 1;
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j === i ? i + 1 : j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(":");
  return `${hex.slice(0, best).join(":")}::${hex.slice(best + bestLen).join(":")}`;
}

const zero = (b: Uint8Array, from: number, to: number) => b.subarray(from, to).every((x) => !x);

/**
 * The IPv4 address an IPv6 one carries and reaches: mapped (::ffff:a.b.c.d), translated,
 * compatible (::a.b.c.d), NAT64 (64:ff9b::/96, 64:ff9b:1::/48) and 6to4 (2002::/16).
 */
function embeddedV4(b: Uint8Array): Uint8Array | null {
  if (b.length !== 16) return null;
  const last = b.subarray(12, 16);
  if (zero(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return last;
  if (zero(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && zero(b, 10, 12)) return last;
  if (zero(b, 0, 12)) return last;
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (zero(b, 4, 12) || (b[4] === 0 && b[5] === 1 && zero(b, 6, 12))) return last;
  }
  if (b[0] === 0x20 && b[1] === 0x02) return b.subarray(2, 6);
  return null;
}

const EC2_V6 = parseIp("fd00:ec2::254")!;

function classifyV4(b: Uint8Array): AddressClass | null {
  if (b[0] === 0) return "unspecified";
  if (b[0] === 127) return "loopback";
  if (b[0] === 169 && b[1] === 254) {
    return b[2] === 169 && b[3] === 254 ? "metadata" : "link-local";
  }
  // Alibaba Cloud's metadata service
  if (b[0] === 100 && b[1] === 100 && b[2] === 100 && b[3] === 200) return "metadata";
  return null;
}

/** The refused class `ip` belongs to, or null for an ordinary address (or not an address). */
export function classifyAddress(ip: string | Uint8Array): AddressClass | null {
  const b = typeof ip === "string" ? parseIp(ip) : ip;
  if (!b) return null;
  if (b.length === 4) return classifyV4(b);
  if (zero(b, 0, 16)) return "unspecified";
  if (zero(b, 0, 15) && b[15] === 1) return "loopback";
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return "link-local";
  if (b.every((x, i) => x === EC2_V6[i])) return "metadata";
  const v4 = embeddedV4(b);
  return v4 ? classifyV4(v4) : null;
}

interface Cidr {
  bytes: Uint8Array;
  bits: number;
}

/** `a.b.c.d`, `a.b.c.d/n`, an IPv6 address or `x::/n`; null when malformed. */
export function parseCidr(s: string): Cidr | null {
  const [ip, bits, extra] = s.split("/");
  if (extra !== undefined) return null;
  const bytes = parseIp(ip);
  if (!bytes) return null;
  if (bits === undefined) return { bytes, bits: bytes.length * 8 };
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > bytes.length * 8) return null;
  return { bytes, bits: Number(bits) };
}

function inCidr(b: Uint8Array, c: Cidr): boolean {
  if (b.length !== c.bytes.length) return false;
  for (let bit = 0; bit < c.bits; bit += 8) {
    const left = c.bits - bit;
    const mask = left >= 8 ? 0xff : (0xff << (8 - left)) & 0xff;
    if ((b[bit / 8] & mask) !== (c.bytes[bit / 8] & mask)) return false;
  }
  return true;
}

/** Origin and path: presigned URLs carry signatures in their query. */
function describe(u: URL): string {
  return `${u.origin}${u.pathname}`;
}

export class OutboundRefused extends Error {
  override readonly name = "OutboundRefused";
  constructor(
    /** origin and path of the refused URL */
    readonly target: string,
    readonly reason: string,
    /** the refused address, when one was */
    readonly address: string | null = null,
    readonly addressClass: AddressClass | null = null,
  ) {
    super(`${target} refused: ${reason}${address ? " (see [global] outbound_allow)" : ""}`);
  }
}

/** Every address `host` resolves to (A and AAAA); empty when it resolves to none. */
export type Resolver = (host: string, signal?: AbortSignal) => Promise<string[]>;

const DNS_TIMEOUT_MS = 5_000;

export const systemResolver: Resolver = async (host, signal) => {
  const timeout = AbortSignal.timeout(DNS_TIMEOUT_MS);
  const s = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const found = await Promise.allSettled([
    Deno.resolveDns(host, "A", { signal: s }),
    Deno.resolveDns(host, "AAAA", { signal: s }),
  ]);
  signal?.throwIfAborted();
  return found.flatMap((r) => r.status === "fulfilled" ? r.value : []);
};

export interface OutboundGuardOptions {
  /** the URLs the config names for this peer */
  configured: readonly (string | URL)[];
  /** `[global] outbound_allow`: IPs and CIDRs reachable whatever their class */
  allow?: readonly string[];
  resolve?: Resolver;
}

function hostOf(u: URL): string {
  return u.hostname.toLowerCase().replace(/^\[|\]$/g, "").replace(/\.$/, "");
}

const isLocalhost = (host: string) => host === "localhost" || host.endsWith(".localhost");
const LOOPBACK_PAIR = [parseIp("127.0.0.1")!, parseIp("::1")!];

/** The addresses a host stands for without asking DNS (RFC 6761 for localhost), or null. */
function literalAddresses(host: string): Uint8Array[] | null {
  if (isLocalhost(host)) return LOOPBACK_PAIR;
  const ip = parseIp(host);
  return ip ? [ip] : null;
}

export class OutboundGuard {
  private readonly trusted = new Set<string>();
  private readonly loopbackNamed: boolean;
  private readonly allow: Cidr[];
  private readonly resolve: Resolver;

  constructor(opts: OutboundGuardOptions) {
    let loopback = false;
    for (const c of opts.configured) {
      let host: string;
      try {
        host = hostOf(new URL(c));
      } catch {
        continue;
      }
      this.trusted.add(host);
      const lit = literalAddresses(host);
      if (lit?.some((a) => classifyAddress(a) === "loopback")) loopback = true;
    }
    this.loopbackNamed = loopback;
    // The config (global_config.ts) validated the list; an entry still unreadable here allows nothing.
    this.allow = (opts.allow ?? []).flatMap((a) => parseCidr(a) ?? []);
    this.resolve = opts.resolve ?? systemResolver;
  }

  /**
   * Why `target` may not be contacted, judged from its URL alone (no DNS), or null. For a URL
   * that is about to be refused anyway (a webhook's redirect), to say why.
   */
  refusalOf(target: URL): OutboundRefused | null {
    if (target.protocol !== "http:" && target.protocol !== "https:") {
      return new OutboundRefused(describe(target), `${target.protocol} is not http(s)`);
    }
    const host = hostOf(target);
    if (this.trusted.has(host)) return null;
    const addrs = literalAddresses(host);
    return addrs ? this.judge(target, host, addrs) : null;
  }

  /** Resolves when `target` may be contacted; throws OutboundRefused otherwise. */
  async check(target: URL, signal?: AbortSignal): Promise<void> {
    const literal = this.refusalOf(target);
    if (literal) throw literal;
    const host = hostOf(target);
    if (this.trusted.has(host) || literalAddresses(host) !== null) return;
    const found = (await this.resolve(host, signal)).flatMap((a) => parseIp(a) ?? []);
    if (found.length === 0) {
      // Behind a proxy the proxy resolves and connects; without one, a name our resolver does
      // not know might still be in /etc/hosts, which we cannot vet.
      if (proxyConfigured()) return;
      throw new OutboundRefused(describe(target), `${host} resolves to no address we could check`);
    }
    const refused = this.judge(target, host, found);
    if (refused) throw refused;
  }

  private judge(target: URL, host: string, addrs: Uint8Array[]): OutboundRefused | null {
    for (const a of addrs) {
      const cls = classifyAddress(a);
      if (cls === null || (cls === "loopback" && this.loopbackNamed)) continue;
      if (this.allowed(a)) continue;
      const v4 = a.length === 16 ? embeddedV4(a) : null;
      const ip = formatIp(a) + (v4 ? ` (${formatIp(v4)})` : "");
      const what = parseIp(host) ? ip : `${host} (${ip})`;
      return new OutboundRefused(describe(target), `${what} is ${LABEL[cls]}`, ip, cls);
    }
    return null;
  }

  private allowed(a: Uint8Array): boolean {
    const v4 = embeddedV4(a);
    return this.allow.some((c) => inCidr(a, c) || (v4 !== null && inCidr(v4, c)));
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** A redirect that was not followed: no usable Location, or too many hops. */
export class RedirectError extends Error {
  override readonly name = "RedirectError";
}

/**
 * The next hop of a redirect answer, or null when `res` is not one. Throws RedirectError when
 * the Location is missing, unparsable or not http(s).
 */
export function redirectTarget(res: Response, from: URL): URL | null {
  if (!REDIRECTS.has(res.status)) return null;
  const location = res.headers.get("location");
  let next: URL;
  try {
    if (location === null) throw new Error("no Location");
    next = new URL(location, from);
  } catch {
    throw new RedirectError(`${res.status} without a usable Location`);
  }
  if (next.protocol !== "http:" && next.protocol !== "https:") {
    throw new RedirectError(`redirect to a ${next.protocol} URL`);
  }
  return next;
}

/**
 * fetch() that follows redirects of GET and HEAD itself, at most `maxRedirects`, each hop
 * checked by `guard` first; credentials do not cross to another origin.
 */
export async function fetchGuarded(
  url: string | URL,
  init: RequestInit,
  guard: OutboundGuard,
  maxRedirects = 5,
): Promise<Response> {
  const first = new URL(url);
  const method = (init.method ?? "GET").toUpperCase();
  let u = first;
  for (let hop = 0;; hop++) {
    await guard.check(u, init.signal ?? undefined);
    const headers = new Headers(init.headers);
    if (u.origin !== first.origin) {
      for (const h of ["authorization", "cookie", "proxy-authorization"]) headers.delete(h);
    }
    const res = await fetch(u, { ...init, headers, redirect: "manual" });
    if (method !== "GET" && method !== "HEAD") return res;
    const next = redirectTarget(res, u);
    if (next === null) return res;
    await res.body?.cancel().catch(() => {});
    if (hop + 1 > maxRedirects) {
      throw new RedirectError(`more than ${maxRedirects} redirects (last to ${describe(next)})`);
    }
    u = next;
  }
}
