// A certificate bundle's details in a sandbox process (docs/design.md, "Untrusted content"): a
// 4 MiB bundle is ~2,700 certificates and 1.3 s of ASN.1 parsing, too long for the thread that
// serves requests. No file, network or environment access: the bytes come as its input.
import { childInput, childMain } from "../sandbox/mod.ts";
import { pemBlocks } from "./pem.ts";

if (import.meta.main) {
  await childMain(async () => {
    const all = new Uint8Array(await new Response(childInput()).arrayBuffer());
    return pemBlocks(all.subarray(0, 64 * 1024), all);
  });
}
