// Tars whose entry names are raw bytes of any length (NUL, control characters, invalid UTF-8,
// a 4 KiB name): each entry carries its name in a PAX `path` record, so a test pushes exactly
// the bytes a hostile layer would.
import { tarHeader } from "./tar.ts";
import { concat } from "./bytes.ts";

const enc = new TextEncoder();

const padded = (b: Uint8Array) => {
  const out = new Uint8Array(Math.ceil(b.length / 512) * 512);
  out.set(b);
  return out;
};

/** One PAX record, `<len> <key>=<value>\n`, its length counting its own digits. */
function paxRecord(key: string, value: Uint8Array): Uint8Array {
  const body = enc.encode(` ${key}=`).length + value.length + 1;
  let len = body + String(body).length;
  if (String(len).length !== String(body).length) len = body + String(len).length;
  return concat(enc.encode(`${len} ${key}=`), value, enc.encode("\n"));
}

/** A tar of regular files named by raw bytes (string = UTF-8), in order, with its end blocks. */
export function paxTarOf(items: { name: Uint8Array | string; data: Uint8Array | string }[]) {
  const parts: Uint8Array[] = [];
  for (const it of items) {
    const name = typeof it.name === "string" ? enc.encode(it.name) : it.name;
    const data = typeof it.data === "string" ? enc.encode(it.data) : it.data;
    const pax = paxRecord("path", name);
    parts.push(tarHeader("PaxHeader", pax.length, "x"), padded(pax));
    parts.push(tarHeader("placeholder", data.length), padded(data));
  }
  parts.push(new Uint8Array(1024));
  return concat(...parts);
}
