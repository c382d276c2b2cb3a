// The walk's third stage: the tar's entries, one listing line each, written in batches as they
// are read. A regular file's data is hashed (sha256 + sha512) chunk by chunk as it passes, its
// head kept to tell its type, and a text file scanned for secrets; nothing holds a whole file.
import { createHash } from "node:crypto";
import type { IndexConfig } from "../config/mod.ts";
import { BudgetExceededError } from "../sandbox/mod.ts";
import type { ListingTail, ListingWriter } from "./listing_document.ts";
import type { ListedEntry } from "./layer_store.ts";
import { type TarEntry, walkTar } from "./tar.ts";
import { isText, mimeType } from "./mime.ts";
import { SecretScanner } from "./secrets.ts";
import { utf8Length } from "./utf8.ts";

const HEAD = 8 * 1024;
/** Listing text gathered before one write (characters, ~bytes). */
const LISTING_BATCH = 64 * 1024;

/**
 * The listing's lines on their way to its files. Lines go out in batches: awaiting one file
 * write per entry stalled the walk (and with it the decoder worker) on every entry of a
 * many-file layer (21k entries: both threads ~55% idle).
 */
export class BatchedListing {
  private lines: string[] = [];
  private chars = 0;

  constructor(private readonly writer: ListingWriter) {}

  async push(line: string): Promise<void> {
    this.lines.push(line);
    this.chars += line.length;
    if (this.chars >= LISTING_BATCH) await this.flush();
  }

  async flush(): Promise<void> {
    if (this.lines.length === 0) return;
    const batch = this.lines;
    this.lines = [];
    this.chars = 0;
    await this.writer.write(batch);
  }

  abort(reason: unknown): Promise<void> {
    return this.writer.abort(reason);
  }

  /** Closes the files (after `flush`); resolves to the stored document's size. */
  close(t: Omit<ListingTail, "refreshing">): Promise<number> {
    return this.writer.close(t);
  }
}

interface FileState {
  sha256: ReturnType<typeof createHash>;
  sha512: ReturnType<typeof createHash>;
  head: Uint8Array;
  headFill: number;
  scanner: SecretScanner | null;
  /** text-ness decided once the head is full (or the file ended) */
  decided: boolean;
}

/** What is learnt of the file whose data is passing (walkTar's `onData`). */
class FileContent {
  private state: FileState | null = null;

  constructor(private readonly maxSecretScanBytes: number) {}

  readonly onData = (e: TarEntry, chunk: Uint8Array): void => {
    if (!this.state) {
      this.state = {
        sha256: createHash("sha256"),
        sha512: createHash("sha512"),
        head: new Uint8Array(Math.min(HEAD, e.size)),
        headFill: 0,
        scanner: null,
        decided: false,
      };
    }
    const s = this.state;
    s.sha256.update(chunk);
    s.sha512.update(chunk);
    if (!s.decided) {
      const n = Math.min(chunk.length, s.head.length - s.headFill);
      s.head.set(chunk.subarray(0, n), s.headFill);
      s.headFill += n;
      if (s.headFill === s.head.length) this.decide(e, s);
      if (s.decided && s.scanner) s.scanner.push(chunk.subarray(n));
    } else if (s.scanner) {
      s.scanner.push(chunk);
    }
  };

  private decide(e: TarEntry, s: FileState): void {
    s.decided = true;
    if (isText(s.head)) {
      s.scanner = new SecretScanner(e.path, { maxBytes: this.maxSecretScanBytes });
      s.scanner.push(s.head);
    }
  }

  /** The listing's `content` of the regular file `e`, whose data has all passed. */
  of(e: TarEntry): NonNullable<ListedEntry["content"]> {
    const s: FileState = this.state ?? {
      sha256: createHash("sha256"),
      sha512: createHash("sha512"),
      head: new Uint8Array(0),
      headFill: 0,
      scanner: null,
      decided: false,
    };
    if (!s.decided) this.decide(e, s);
    const secrets = s.scanner?.finish() ?? [];
    const content: NonNullable<ListedEntry["content"]> = {
      sha256: s.sha256.digest("hex"),
      sha512: s.sha512.digest("hex"),
      mime_type: mimeType(e.path, s.head.subarray(0, s.headFill)),
    };
    if (secrets.length) content.secrets = secrets;
    return content;
  }

  /** The entry is done: the next one's data starts afresh. */
  next(): void {
    this.state = null;
  }
}

/** A path or link target longer than max_path_bytes passes a budget. */
function checkNames(e: TarEntry, max: number): void {
  for (const [what, name] of [["path", e.path], ["link target", e.linkTarget]] as const) {
    if (name !== undefined && utf8Length(name, max) > max) {
      throw new BudgetExceededError(
        "max_path_bytes",
        max,
        `a ${what} of ${utf8Length(name)} bytes`,
      );
    }
  }
}

function listedEntry(e: TarEntry): ListedEntry {
  const out: ListedEntry = {
    path: e.path,
    kind: e.kind,
    size: e.size,
    mode: e.mode,
    uid: e.uid,
    gid: e.gid,
    mtime: e.mtime,
    offset: e.offset,
  };
  if (e.linkTarget !== undefined) out.link_target = e.linkTarget;
  if (e.capabilities?.length) out.capabilities = e.capabilities;
  return out;
}

export interface ReadEntriesOptions {
  tar: ReadableStream<Uint8Array>;
  limits: IndexConfig;
  listing: BatchedListing;
  signal?: AbortSignal;
}

export interface EntriesRead {
  /** entries listed (each pushed to the listing) */
  entries: number;
  /** what ended the walk before the archive's end (the tar, a limit, the decoder, an abort) */
  stopped?: { reason: unknown };
}

/** Stage 3: lists every entry until the archive ends or something stops the walk. */
export async function readEntries(o: ReadEntriesOptions): Promise<EntriesRead> {
  const content = new FileContent(o.limits.maxSecretScanBytes);
  let entries = 0;
  try {
    for await (
      const e of walkTar(o.tar, { onData: content.onData, maxEntries: o.limits.maxEntries })
    ) {
      o.signal?.throwIfAborted();
      checkNames(e, o.limits.maxPathBytes);
      const out = listedEntry(e);
      if (e.kind === "file") out.content = content.of(e);
      content.next();
      entries++;
      await o.listing.push(JSON.stringify(out));
    }
  } catch (reason) {
    return { entries, stopped: { reason } };
  }
  return { entries };
}
