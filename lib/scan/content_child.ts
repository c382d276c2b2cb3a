// The report's parsing in a sandbox process (docs/design.md, "Untrusted content"): no file,
// network or environment access at all. The scan job streams it a header and the files it
// picked on standard input; it prints what readImageContent makes of them.
import { childInput, childMain } from "../sandbox/mod.ts";
import { type ContentInput, readImageContent } from "./image_content.ts";

/** One file of the input, in the order its bytes follow the header. */
export interface ContentFile {
  path: string;
  kind: "database" | "lockfile" | "config";
  size: number;
}

export interface ContentHeader {
  files: ContentFile[];
  pythonPaths: string[];
  maxPackages: number;
}

/** The header as it goes first on the child's input: a 4-byte big-endian length, then JSON. */
export function encodeHeader(h: ContentHeader): Uint8Array {
  const json = new TextEncoder().encode(JSON.stringify(h));
  const out = new Uint8Array(4 + json.length);
  new DataView(out.buffer).setUint32(0, json.length);
  out.set(json, 4);
  return out;
}

/** The header and files back from the bytes the parent sent. */
export function decodeInput(all: Uint8Array): ContentInput {
  const n = new DataView(all.buffer, all.byteOffset, all.byteLength).getUint32(0);
  const h = JSON.parse(new TextDecoder().decode(all.subarray(4, 4 + n))) as ContentHeader;
  const input: ContentInput = {
    databases: new Map(),
    lockfiles: new Map(),
    pythonPaths: h.pythonPaths,
    config: null,
    maxPackages: h.maxPackages,
  };
  let at = 4 + n;
  for (const f of h.files) {
    const bytes = all.subarray(at, at + f.size);
    if (bytes.length !== f.size) throw new Error(`input ended inside ${f.path}`);
    at += f.size;
    if (f.kind === "config") input.config = bytes;
    else (f.kind === "database" ? input.databases : input.lockfiles).set(f.path, bytes);
  }
  return input;
}

/** The parse: run by childMain in a process, a worker, or through main.ts's sandbox entry. */
export async function main(): Promise<unknown> {
  const all = new Uint8Array(await new Response(childInput()).arrayBuffer());
  return readImageContent(decodeInput(all));
}

if (import.meta.main) await childMain(main);
