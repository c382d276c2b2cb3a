// Building small tar layers in tests: ustar headers written by hand, so a test controls every
// field (types, modes, link targets) a layer may carry.

export function tarHeader(
  name: string,
  size: number,
  type = "0",
  mode = 0o644,
  linkTarget = "",
): Uint8Array {
  const h = new Uint8Array(512);
  const enc = new TextEncoder();
  const put = (off: number, s: string) => h.set(enc.encode(s), off);
  const oct = (off: number, len: number, v: number) =>
    put(off, v.toString(8).padStart(len - 1, "0") + "\0");
  put(0, name);
  oct(100, 8, mode);
  oct(108, 8, 0);
  oct(116, 8, 0);
  oct(124, 12, size);
  oct(136, 12, 1_700_000_000);
  put(156, type);
  if (linkTarget) put(157, linkTarget);
  put(257, "ustar\u000000");
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  put(148, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

export interface TarItem {
  path: string;
  /** a regular file's bytes (string = UTF-8) */
  data?: Uint8Array | string;
  /** `0` file (default), `2` symlink, `1` hard link, `5` directory */
  type?: string;
  mode?: number;
  link?: string;
}

/** A tar of `items`, in order, with its two end blocks. */
export function tarOf(items: TarItem[]): Uint8Array {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  for (const it of items) {
    const data = typeof it.data === "string" ? enc.encode(it.data) : it.data ?? new Uint8Array(0);
    const type = it.type ?? "0";
    parts.push(
      tarHeader(
        it.path,
        type === "0" ? data.length : 0,
        type,
        it.mode ?? (type === "5" ? 0o755 : 0o644),
        it.link ?? "",
      ),
    );
    if (type === "0") {
      const padded = new Uint8Array(Math.ceil(data.length / 512) * 512);
      padded.set(data);
      parts.push(padded);
    }
  }
  parts.push(new Uint8Array(1024));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
