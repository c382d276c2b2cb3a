// A streaming tar walker for layer indexing (SPEC §Layer listing): ustar, GNU (long names and
// links, base-256 numbers, sparse files), PAX (path, linkpath, size, mtime, uid, gid, the
// file-capability xattr, GNU's sparse records) and old v7 headers. File data is handed to `onData` chunk by chunk as it streams past,
// never buffered, so memory stays flat whatever the layer holds; only header-sized records
// (PAX records, GNU long names) are read whole, and they are capped.
//
// A sparse file (GNU `S` headers, PAX sparse 0.0, 0.1 and 1.0) is listed under its real name
// and size as kind `other`, its data skipped: the archive holds its segments packed together
// (and, for PAX 1.0, a map in front), so no byte range of the stream is the file, and
// expanding the holes would let a tiny archive make the indexer hash terabytes of zeros.
//
// Written here rather than taken from npm: `tar-stream` and `tar` (node-tar) both need Node
// streams around a Web stream, neither reports the data offset of an entry in the
// uncompressed stream (the random-access reads need it), and node-tar drops the PAX xattr
// records this listing reports.
//
// Header fields are read by tar_header.ts, the capability xattr by tar_caps.ts.
import {
  BLOCK,
  checksumOk,
  cString,
  HEADER_ONLY,
  kindOf,
  normalizePath,
  parseNumber,
  parsePax,
  type Pax,
  type TarEntry,
  TarError,
  type TarKind,
} from "./tar_header.ts";
import { decodeCapabilities } from "./tar_caps.ts";

export { type TarEntry, TarError, type TarKind } from "./tar_header.ts";

export interface WalkOptions {
  /** file data, in order, for the entry about to be yielded (regular files only) */
  onData?: (entry: TarEntry, chunk: Uint8Array) => void;
  /** more entries than this end the walk with a TarError */
  maxEntries?: number;
}

// A PAX record set or a GNU long name is metadata: a megabyte is far beyond any real one, and
// the cap keeps a hostile archive from making the walker buffer gigabytes.
const META_MAX = 1024 * 1024;

/** Pulls exact byte counts out of a chunked stream, tracking the absolute position. */
class ByteSource {
  private buf: Uint8Array = new Uint8Array(0);
  private at = 0;
  /** bytes consumed so far */
  pos = 0;
  private ended = false;

  constructor(private readonly reader: ReadableStreamDefaultReader<Uint8Array>) {}

  private get buffered(): number {
    return this.buf.length - this.at;
  }

  /** The next non-empty chunk, taken only once the buffered bytes are used up. */
  private async fill(): Promise<boolean> {
    while (!this.ended) {
      const { value, done } = await this.reader.read();
      if (done) {
        this.ended = true;
        return false;
      }
      if (value.length === 0) continue;
      this.buf = value;
      this.at = 0;
      return true;
    }
    return false;
  }

  /** Exactly `n` bytes, or fewer at the end of the stream. */
  async read(n: number): Promise<Uint8Array> {
    if (this.buffered >= n) {
      const out = this.buf.slice(this.at, this.at + n);
      this.at += n;
      this.pos += n;
      return out;
    }
    // Copied once into the result: joining each chunk onto the buffered rest instead made a
    // 1 MiB PAX record arriving in 64-byte chunks cost 8 GB of copying.
    const out = new Uint8Array(n);
    let k = 0;
    while (k < n) {
      if (this.buffered === 0 && !(await this.fill())) break;
      const m = Math.min(n - k, this.buffered);
      out.set(this.buf.subarray(this.at, this.at + m), k);
      this.at += m;
      k += m;
    }
    this.pos += k;
    return k < n ? out.slice(0, k) : out;
  }

  /** Passes the next `n` bytes to `sink` as they arrive; returns how many there were. */
  async pass(n: number, sink: ((c: Uint8Array) => void) | null): Promise<number> {
    let left = n;
    while (left > 0) {
      if (this.buffered === 0 && !(await this.fill())) break;
      const k = Math.min(left, this.buffered);
      sink?.(this.buf.subarray(this.at, this.at + k));
      this.at += k;
      this.pos += k;
      left -= k;
    }
    return n - left;
  }

  async cancel(): Promise<void> {
    await this.reader.cancel().catch(() => {});
  }
}

/**
 * Yields every entry in tar order. A regular file's data goes to `onData` before the entry is
 * yielded. A corrupt or truncated archive throws a TarError after the entries read so far.
 */
export async function* walkTar(
  stream: ReadableStream<Uint8Array>,
  opts: WalkOptions = {},
): AsyncGenerator<TarEntry> {
  const src = new ByteSource(stream.getReader());
  const maxEntries = opts.maxEntries ?? Number.MAX_SAFE_INTEGER;
  let count = 0;
  let pax: Pax = {};
  let longName: string | null = null;
  let longLink: string | null = null;
  let finished = false;
  try {
    for (;;) {
      const at = src.pos;
      const h = await src.read(BLOCK);
      if (h.length === 0) {
        // The end-of-archive blocks are missing; a stream ending on a header boundary after
        // whole entries is accepted (Go and GNU tar read it too).
        if (longName !== null || longLink !== null || Object.keys(pax).length) {
          throw new TarError(`archive ends after an extended header at offset ${at}`);
        }
        break;
      }
      if (h.length < BLOCK) throw new TarError(`truncated header at offset ${at}`);
      if (h.every((b) => b === 0)) break; // end of archive
      if (!checksumOk(h)) throw new TarError(`corrupt header at offset ${at} (bad checksum)`);

      const type = String.fromCharCode(h[156]);
      const magic = cString(h.subarray(257, 263));
      const gnu = magic === "ustar " || (h[257] === 0x75 && h[262] === 0x20);
      const size = parseNumber(h.subarray(124, 136));
      if (size === null || size < 0) {
        throw new TarError(`corrupt header at offset ${at} (size field)`);
      }

      // Metadata records that describe the next header.
      if (type === "x" || type === "g" || type === "L" || type === "K") {
        if (size > META_MAX) {
          throw new TarError(`extended header of ${size} bytes at offset ${at} is too large`);
        }
        const data = await src.read(size);
        if (data.length < size) throw new TarError(`truncated extended header at offset ${at}`);
        await skipPadding(src, size);
        if (type === "x") parsePax(data, pax);
        // A global header's records apply to later entries by default only; none of the
        // fields reported here are normally set there, so it is read (to validate) and left.
        else if (type === "g") parsePax(data, {});
        else if (type === "L") longName = cString(data);
        else longLink = cString(data);
        continue;
      }
      if (type === "V") {
        // a volume label names the archive, not a file
        await skipData(src, size, at);
        continue;
      }

      let name = cString(h.subarray(0, 100));
      if (!gnu && magic === "ustar") {
        const prefix = cString(h.subarray(345, 500));
        if (prefix) name = `${prefix}/${name}`;
      }
      if (longName !== null) name = longName;
      if (pax.path !== undefined) name = pax.path;
      if (pax.sparseName !== undefined) name = pax.sparseName;
      let link = cString(h.subarray(157, 257));
      if (longLink !== null) link = longLink;
      if (pax.linkpath !== undefined) link = pax.linkpath;
      const dataSize = pax.size ?? size;
      const mode = parseNumber(h.subarray(100, 108));
      const uid = pax.uid ?? parseNumber(h.subarray(108, 116));
      const gid = pax.gid ?? parseNumber(h.subarray(116, 124));
      const mtime = pax.mtime ?? parseNumber(h.subarray(136, 148));
      if (mode === null || uid === null || gid === null || mtime === null) {
        throw new TarError(`corrupt header at offset ${at} (numeric field)`);
      }

      // Old GNU sparse: the real size sits at 483, the first four segments in this header and
      // the rest in 512-byte extension blocks between it and the data, outside `size`.
      let sparseSize = pax.sparse ? pax.sparseSize ?? null : null;
      if (type === "S") {
        sparseSize = parseNumber(h.subarray(483, 495));
        if (sparseSize === null || sparseSize < 0) {
          throw new TarError(`corrupt header at offset ${at} (sparse size field)`);
        }
        for (let ext = h[482] !== 0; ext;) {
          const eh = await src.read(BLOCK);
          if (eh.length < BLOCK) throw new TarError(`truncated sparse header at offset ${at}`);
          ext = eh[504] !== 0;
        }
      }
      const sparse = type === "S" || pax.sparse === true;

      let kind: TarKind = sparse ? "other" : kindOf(type, name);
      let path = normalizePath(name);
      const base = path.slice(path.lastIndexOf("/") + 1);
      const dir = path.slice(0, Math.max(0, path.lastIndexOf("/")));
      if (base === ".wh..wh..opq") {
        kind = "opaque";
        path = dir;
      } else if (base.startsWith(".wh.") && !base.startsWith(".wh..wh.")) {
        kind = "whiteout";
        path = dir ? `${dir}/${base.slice(4)}` : base.slice(4);
      }

      const readsData = !HEADER_ONLY.has(type);
      const entry: TarEntry = {
        path,
        kind,
        size: readsData ? (sparse ? sparseSize ?? dataSize : dataSize) : 0,
        mode: mode & 0o7777,
        uid,
        gid,
        mtime,
        offset: src.pos,
      };
      if (kind === "symlink" || kind === "hardlink") {
        entry.linkTarget = kind === "hardlink" ? normalizePath(link) : link;
      }
      if (pax.capability) {
        const caps = decodeCapabilities(pax.capability);
        if (caps.length) entry.capabilities = caps;
      }
      pax = {};
      longName = null;
      longLink = null;

      if (++count > maxEntries) {
        throw new TarError(`more than ${maxEntries} entries (max_entries)`);
      }
      if (readsData) {
        const onData = opts.onData;
        const sink = kind === "file" && onData ? (c: Uint8Array) => onData(entry, c) : null;
        const got = await src.pass(dataSize, sink);
        if (got < dataSize) {
          throw new TarError(
            `archive truncated in the data of ${JSON.stringify(path)} (offset ${entry.offset})`,
          );
        }
        await skipPadding(src, dataSize);
      }
      yield entry;
    }
    finished = true;
  } finally {
    if (!finished) await src.cancel();
  }
}

async function skipData(src: ByteSource, size: number, at: number): Promise<void> {
  if ((await src.pass(size, null)) < size) throw new TarError(`truncated entry at offset ${at}`);
  await skipPadding(src, size);
}

async function skipPadding(src: ByteSource, size: number): Promise<void> {
  // A stream that ends inside the last entry's padding lost nothing that was listed: the
  // next header read reports the end.
  await src.pass((BLOCK - size % BLOCK) % BLOCK, null);
}
