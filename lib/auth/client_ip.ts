// The client IP a policy sees: the socket peer, or — only when that peer is a trusted proxy —
// the nearest untrusted address of X-Forwarded-For (walked right to left, so a client cannot
// forge its way past the proxies by prepending entries).

interface Net {
  v6: boolean;
  bytes: Uint8Array;
  bits: number;
}

const V4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseV4(s: string): Uint8Array | null {
  const m = V4.exec(s);
  if (!m) return null;
  const b = m.slice(1).map(Number);
  return b.every((x) => x <= 255) ? new Uint8Array(b) : null;
}

function parseIp(s: string): { v6: boolean; bytes: Uint8Array } | null {
  s = s.trim().replace(/^\[|\]$/g, "");
  const v4 = parseV4(s);
  if (v4) return { v6: false, bytes: v4 };
  // RFC 4291 §2.2: the last 32 bits may be written as IPv4 (`64:ff9b::192.0.2.1`), as proxies
  // write NAT64 clients; read as garbage, such a client would be judged as the proxy itself.
  const colon = s.lastIndexOf(":");
  if (s.includes(".") && colon >= 0) {
    const low = parseV4(s.slice(colon + 1));
    if (!low) return null;
    const hex = (i: number) => ((low[i] << 8) | low[i + 1]).toString(16);
    s = `${s.slice(0, colon + 1)}${hex(0)}:${hex(2)}`;
  }
  if (!/^[0-9a-fA-F:]+$/.test(s) || !s.includes(":")) return null;
  const [head, tail, more] = s.split("::");
  if (more !== undefined) return null;
  const h = head ? head.split(":") : [];
  const t = tail !== undefined && tail !== "" ? tail.split(":") : [];
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  // `::` stands for at least one group: with eight around it, it is not an address
  if (tail !== undefined && fill < 1) return null;
  const groups = [...h, ...new Array(fill).fill("0"), ...t];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 0xff;
  });
  // IPv4-mapped (`::ffff:10.1.2.3`, however spelled) is the IPv4 address, as trusted nets say it
  if (bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) {
    return { v6: false, bytes: bytes.slice(12) };
  }
  return { v6: true, bytes };
}

function parseNet(s: string): Net | null {
  const [ip, bits] = s.split("/");
  const p = parseIp(ip);
  if (!p) return null;
  return { ...p, bits: bits === undefined ? p.bytes.length * 8 : Number(bits) };
}

function contains(net: Net, ip: { v6: boolean; bytes: Uint8Array }): boolean {
  if (net.v6 !== ip.v6) return false;
  let bits = net.bits;
  for (let i = 0; i < net.bytes.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((net.bytes[i] & mask) !== (ip.bytes[i] & mask)) return false;
  }
  return true;
}

/** a DNS name or IP literal with an optional port: what may appear in a derived realm */
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export class ClientIpResolver {
  private readonly nets: Net[];
  constructor(trustedProxies: string[]) {
    this.nets = trustedProxies.map(parseNet).filter((n): n is Net => n !== null);
  }

  private trusted(addr: string): boolean {
    const ip = parseIp(addr);
    return ip !== null && this.nets.some((n) => contains(n, ip));
  }

  /**
   * The origin (`scheme://host[:port]`) a client used to reach this service: from the request's
   * Host, or — only when the peer is a trusted proxy — its X-Forwarded-Proto/X-Forwarded-Host
   * (the first, client-side value of each list). Null when the host is missing or malformed, so
   * nothing a client sends is echoed into a header unchecked.
   */
  origin(peer: string, requestUrl: string, headers: Headers): string | null {
    let proto = new URL(requestUrl).protocol.replace(":", "");
    let host = headers.get("host");
    if (this.trusted(peer)) {
      const fp = headers.get("x-forwarded-proto")?.split(",")[0].trim().toLowerCase();
      const fh = headers.get("x-forwarded-host")?.split(",")[0].trim();
      if (fp === "http" || fp === "https") proto = fp;
      if (fh) host = fh;
    }
    if (!host || !HOST.test(host)) return null;
    return `${proto}://${host.toLowerCase()}`;
  }

  /**
   * Walks X-Forwarded-For from its right end, reading only the hops it passes (what the client
   * wrote on the left is never parsed unless every hop to its right is a trusted proxy).
   */
  resolve(peer: string, forwardedFor: string | null): string {
    if (!forwardedFor || !this.trusted(peer)) return peer;
    let first: string | null = null;
    for (let end = forwardedFor.length; end >= 0;) {
      const comma = end > 0 ? forwardedFor.lastIndexOf(",", end - 1) : -1;
      const hop = forwardedFor.slice(comma + 1, end).trim();
      end = comma;
      if (hop === "") continue;
      const addr = withoutPort(hop);
      const ip = parseIp(addr);
      // An entry a trusted proxy wrote but nobody can read ("unknown"): the client behind it is
      // unknown too. Not the proxy's own address, which a policy may trust; the unspecified
      // address, which no sensible policy does.
      if (!ip) return UNKNOWN_CLIENT;
      if (!this.nets.some((n) => contains(n, ip))) return unbracket(addr);
      first = addr;
    }
    // every hop trusted: the first, as the chain's origin
    return first === null ? peer : unbracket(first);
  }
}

const unbracket = (hop: string) => hop.replace(/^\[|\]$/g, "");

/** The client IP of a request whose forwarding chain names an address nobody can read. */
export const UNKNOWN_CLIENT = "0.0.0.0";

/**
 * An entry without the port some gateways add (`203.0.113.7:5678`, `[2001:db8::1]:5678`); a bare
 * IPv6 address, whose colons are its own, is left as it is.
 */
function withoutPort(hop: string): string {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(hop);
  if (v4) return v4[1];
  const v6 = /^(\[[0-9A-Fa-f:.]+\]):\d{1,5}$/.exec(hop);
  return v6 ? v6[1] : hop;
}
