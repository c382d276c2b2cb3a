// The client IP a policy sees: the socket peer, or — only when that peer is a trusted proxy —
// the nearest untrusted address of X-Forwarded-For (walked right to left, so a client cannot
// forge its way past the proxies by prepending entries).

interface Net {
  v6: boolean;
  bytes: Uint8Array;
  bits: number;
}

function parseIp(s: string): { v6: boolean; bytes: Uint8Array } | null {
  s = s.trim().replace(/^\[|\]$/g, "");
  if (s.startsWith("::ffff:") && s.includes(".")) s = s.slice(7);
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (v4) {
    const b = v4.slice(1).map(Number);
    return b.every((x) => x <= 255) ? { v6: false, bytes: new Uint8Array(b) } : null;
  }
  if (!/^[0-9a-fA-F:]+$/.test(s) || !s.includes(":")) return null;
  const [head, tail, more] = s.split("::");
  if (more !== undefined) return null;
  const h = head ? head.split(":") : [];
  const t = tail !== undefined && tail !== "" ? tail.split(":") : [];
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const groups = [...h, ...new Array(Math.max(fill, 0)).fill("0"), ...t];
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    const n = parseInt(g, 16);
    bytes[2 * i] = n >> 8;
    bytes[2 * i + 1] = n & 0xff;
  });
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

  resolve(peer: string, forwardedFor: string | null): string {
    if (!forwardedFor || !this.trusted(peer)) return peer;
    const hops = forwardedFor.split(",").map((h) => h.trim()).filter(Boolean);
    for (let i = hops.length - 1; i >= 0; i--) {
      if (!parseIp(hops[i])) return peer; // garbage in the chain: believe only the socket
      if (!this.trusted(hops[i])) return hops[i].replace(/^\[|\]$/g, "");
    }
    return hops[0] ?? peer;
  }
}
