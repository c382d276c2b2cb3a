// What one tar header says (tar.ts walks the stream): the entry it describes, its numeric and
// string fields (octal or GNU base-256, NUL padded), its checksum, PAX records and the kind its
// type flag names.

export type TarKind = "file" | "dir" | "symlink" | "hardlink" | "whiteout" | "opaque" | "other";

export interface TarEntry {
  path: string;
  kind: TarKind;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  /** Unix seconds */
  mtime: number;
  /** where the entry's data starts in the uncompressed stream */
  offset: number;
  linkTarget?: string;
  /** names of the permitted capabilities of a `security.capability` xattr */
  capabilities?: string[];
}

/** A corrupt or truncated archive: what was yielded before it stands. */
export class TarError extends Error {}

export const BLOCK = 512;

/** No leading `./` or `/`, no trailing `/`, no empty or `.` segments. */
export function normalizePath(p: string): string {
  return p.split("/").filter((s) => s !== "" && s !== ".").join("/");
}

export function cString(b: Uint8Array): string {
  const z = b.indexOf(0);
  return new TextDecoder().decode(z < 0 ? b : b.subarray(0, z));
}

/** An octal field (NUL/space padded) or GNU base-256 (high bit set); null when unreadable. */
export function parseNumber(b: Uint8Array): number | null {
  if (b.length > 0 && (b[0] & 0x80)) {
    const negative = (b[0] & 0x40) !== 0;
    let v = 0;
    for (let i = 0; i < b.length; i++) {
      let byte = i === 0 ? b[0] & 0x7f : b[i];
      if (negative) byte = (i === 0 ? 0x7f : 0xff) - byte;
      v = v * 256 + byte;
      if (v > Number.MAX_SAFE_INTEGER) return null;
    }
    return negative ? -(v + 1) : v;
  }
  const s = cString(b).trim();
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) return null;
  const v = parseInt(s, 8);
  return Number.isSafeInteger(v) ? v : null;
}

export function checksumOk(h: Uint8Array): boolean {
  const stored = parseNumber(h.subarray(148, 156));
  if (stored === null) return false;
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const b = i >= 148 && i < 156 ? 32 : h[i];
    unsigned += b;
    signed += b > 127 ? b - 256 : b;
  }
  return stored === unsigned || stored === signed;
}

export interface Pax {
  path?: string;
  linkpath?: string;
  size?: number;
  mtime?: number;
  uid?: number;
  gid?: number;
  capability?: Uint8Array;
  /** any GNU.sparse.* record: the entry is a sparse file */
  sparse?: boolean;
  /** GNU.sparse.name (0.1, 1.0): the real name, over `path` */
  sparseName?: string;
  /** GNU.sparse.realsize (1.0) or GNU.sparse.size (0.x): the file's size with its holes */
  sparseSize?: number;
}

/** PAX records `<len> <key>=<value>\n`; values stay bytes (an xattr value is binary). */
export function parsePax(data: Uint8Array, into: Pax): void {
  const dec = new TextDecoder();
  let i = 0;
  while (i < data.length) {
    if (data[i] === 0) break; // NUL padding after the last record
    const sp = data.indexOf(0x20, i);
    if (sp < 0 || sp - i > 20) throw new TarError("malformed PAX record length");
    const len = Number(dec.decode(data.subarray(i, sp)));
    if (!Number.isSafeInteger(len) || len <= sp - i + 1 || i + len > data.length) {
      throw new TarError("malformed PAX record length");
    }
    const rec = data.subarray(sp + 1, i + len);
    if (rec[rec.length - 1] !== 0x0a) throw new TarError("malformed PAX record");
    const eq = rec.indexOf(0x3d);
    if (eq < 0) throw new TarError("malformed PAX record");
    const key = dec.decode(rec.subarray(0, eq));
    const raw = rec.subarray(eq + 1, rec.length - 1);
    const num = () => {
      const s = dec.decode(raw);
      if (!/^-?\d+(\.\d+)?$/.test(s)) throw new TarError(`malformed PAX ${key}`);
      const v = Math.floor(Number(s));
      if (!Number.isSafeInteger(v)) throw new TarError(`malformed PAX ${key}`);
      return v;
    };
    switch (key) {
      case "path":
        into.path = dec.decode(raw);
        break;
      case "linkpath":
        into.linkpath = dec.decode(raw);
        break;
      case "size":
        into.size = num();
        if (into.size < 0) throw new TarError("negative PAX size");
        break;
      case "mtime":
        into.mtime = num();
        break;
      case "uid":
        into.uid = num();
        break;
      case "gid":
        into.gid = num();
        break;
      case "GNU.sparse.name":
        into.sparse = true;
        into.sparseName = dec.decode(raw);
        break;
      case "GNU.sparse.realsize":
      case "GNU.sparse.size":
        into.sparse = true;
        into.sparseSize = num();
        if (into.sparseSize < 0) throw new TarError(`negative PAX ${key}`);
        break;
      case "GNU.sparse.major":
      case "GNU.sparse.minor":
      case "GNU.sparse.map":
      case "GNU.sparse.numblocks":
      case "GNU.sparse.offset":
      case "GNU.sparse.numbytes":
        into.sparse = true;
        break;
      case "SCHILY.xattr.security.capability":
        into.capability = raw.slice();
        break;
      case "LIBARCHIVE.xattr.security.capability":
        // libarchive's own record carries the value base64-encoded (unpadded).
        try {
          const b64 = dec.decode(raw).replace(/-/g, "+").replace(/_/g, "/");
          into.capability = Uint8Array.from(
            atob(b64 + "=".repeat((4 - b64.length % 4) % 4)),
            (c) => c.charCodeAt(0),
          );
        } catch {
          // an unreadable value: no capabilities reported
        }
        break;
    }
    i += len;
  }
}

export function kindOf(type: string, name: string): TarKind {
  switch (type) {
    case "0":
    case "\0":
    case "7":
      // v7 archives mark directories with a trailing slash only
      return name.endsWith("/") ? "dir" : "file";
    case "1":
      return "hardlink";
    case "2":
      return "symlink";
    case "5":
    case "D":
      return "dir";
    default:
      return "other";
  }
}

// Types whose size field describes no data (as Go's archive/tar reads them): the size of a
// link or directory never moves the reader.
export const HEADER_ONLY = new Set(["1", "2", "3", "4", "5", "6"]);
