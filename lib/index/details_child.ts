// A certificate bundle's details in a sandbox process (docs/design.md, "Untrusted content"): a
// 4 MiB bundle is ~2,700 certificates and 1.3 s of ASN.1 parsing, too long for the thread that
// serves requests. No file, network or environment access: the bytes come as its input.
import { childInput, childMain } from "../sandbox/mod.ts";
import { pemBlocks } from "./pem.ts";

/** The parse: run by childMain in a process, a worker, or through main.ts's sandbox entry. */
export async function main(): Promise<unknown> {
  const all = new Uint8Array(await new Response(childInput()).arrayBuffer());
  return pemBlocks(all.subarray(0, 64 * 1024), all);
}

if (import.meta.main) await childMain(main);
