// Reading the planned files (a config, package databases) into packages, the OS release and
// the config's secrets: streamed into a sandbox process (content_child.ts), or parsed here with
// `sandbox = "off"` or when a small config is all there is.
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import { concatBytes } from "../streams/mod.ts";
import type { ScanConfig } from "../config/mod.ts";
import { type ContentResult, readImageContent } from "./image_content.ts";
import {
  type ContentFile,
  type ContentHeader,
  decodeInput,
  encodeHeader,
} from "./content_child.ts";

/** 100,000 packages as JSON with their warnings stay far below this. */
const MAX_CONTENT_OUTPUT = 256 << 20;
/** A config this small is parsed in the serving process when it is all there is to parse. */
const INLINE_CONFIG = 256 << 10;
const CONTENT_CHILD = new URL("./content_child.ts", import.meta.url);

/** A file the parse will get, read from its layer (or the config blob) as it is sent. */
export interface Planned {
  path: string;
  kind: ContentFile["kind"];
  size: number;
  open: () => Promise<ReadableStream<Uint8Array>>;
}

/**
 * Parses the planned files: in a sandbox process fed on its input (`[scan] sandbox`), or
 * here with `sandbox = "off"`. A budget passed leaves a report of the image's layers and
 * config without packages, and says why.
 */
export async function readContent(
  opts: Pick<ScanConfig, "maxPackages" | "sandbox" | "budget">,
  planned: Planned[],
  pythonPaths: string[],
  signal?: AbortSignal,
): Promise<ContentResult> {
  const header: ContentHeader = {
    files: planned.map(({ path, kind, size }) => ({ path, kind, size })),
    pythonPaths,
    maxPackages: opts.maxPackages,
  };
  async function* feed(): AsyncGenerator<Uint8Array> {
    yield encodeHeader(header);
    for (const f of planned) {
      let n = 0;
      for await (const c of await f.open()) {
        const part = c.subarray(0, Math.max(0, f.size - n));
        n += part.length;
        // Written to the sandbox before the next chunk is read (runSandboxed), so no copy.
        if (part.length) yield part;
        if (n >= f.size) break;
      }
      if (n !== f.size) throw new Error(`${f.path}: ${n} of ${f.size} bytes could be read`);
    }
  }
  // An image with nothing to parse but a small config (most pushes in tests, many artifacts)
  // is read here: a few milliseconds of JSON, against a process start.
  const onlySmallConfig = planned.every((f) => f.kind === "config" && f.size <= INLINE_CONFIG) &&
    pythonPaths.length === 0;
  if (opts.sandbox === "off" || onlySmallConfig) {
    const parts: Uint8Array[] = [];
    for await (const c of feed()) parts.push(c.slice());
    return readImageContent(
      decodeInput(concatBytes(parts, parts.reduce((n, p) => n + p.length, 0))),
    );
  }
  // A store that fails while feeding is this side's trouble, retried as the job: not a verdict
  // on the image.
  let feedError: unknown = null;
  const fed = async function* () {
    try {
      yield* feed();
    } catch (e) {
      feedError = e;
      throw e;
    }
  };
  try {
    return await runSandboxedJson<ContentResult>({
      mode: opts.sandbox,
      label: "scan",
      module: CONTENT_CHILD,
      args: null,
      stdin: ReadableStream.from(fed()),
      budget: opts.budget,
      maxOutputBytes: MAX_CONTENT_OUTPUT,
      signal,
    });
  } catch (e) {
    if (feedError) throw feedError;
    // The same bytes would end the same way: the report says so, rather than the scan failing
    // (and every report request queueing it again).
    if (!isSandboxVerdict(e)) throw e;
    return {
      os: null,
      packages: [],
      platform: null,
      configSecrets: [],
      warnings: [`packages and config were not read: ${e.message}`],
    };
  }
}
