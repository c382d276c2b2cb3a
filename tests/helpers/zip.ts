// ZIP archives as OSV serves its advisory dumps, for the advisory download tests.
import zlib from "node:zlib";

const enc = new TextEncoder();

/**
 * A ZIP of `files`, each deflated or stored as `deflate` says (CRCs are left 0: Wharf checks
 * sizes and inflation).
 */
export function zipOf(
  files: Record<string, string | Uint8Array>,
  opts: { deflate: boolean },
): Uint8Array {
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let at = 0;
  for (const [name, content] of Object.entries(files)) {
    const data = typeof content === "string" ? enc.encode(content) : content;
    const body = opts.deflate ? new Uint8Array(zlib.deflateRawSync(data)) : data;
    const method = opts.deflate ? 8 : 0;
    const n = enc.encode(name);
    const lh = new Uint8Array(30 + n.length);
    const lv = new DataView(lh.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(8, method, true);
    lv.setUint32(18, body.length, true);
    lv.setUint32(22, data.length, true);
    lv.setUint16(26, n.length, true);
    lh.set(n, 30);
    const ch = new Uint8Array(46 + n.length);
    const cv = new DataView(ch.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(10, method, true);
    cv.setUint32(20, body.length, true);
    cv.setUint32(24, data.length, true);
    cv.setUint16(28, n.length, true);
    cv.setUint32(42, at, true);
    ch.set(n, 46);
    parts.push(lh, body);
    central.push(ch);
    at += lh.length + body.length;
  }
  const cdSize = central.reduce((s, c) => s + c.length, 0);
  const eocd = new Uint8Array(22);
  const ev = new DataView(eocd.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(8, central.length, true);
  ev.setUint16(10, central.length, true);
  ev.setUint32(12, cdSize, true);
  ev.setUint32(16, at, true);
  const all = [...parts, ...central, eocd];
  const out = new Uint8Array(all.reduce((s, p) => s + p.length, 0));
  let w = 0;
  for (const p of all) {
    out.set(p, w);
    w += p.length;
  }
  return out;
}
