// A stable digest of what a verdict depends on, so stored verdicts are re-checked when it changes.
import { createHash } from "node:crypto";
import type { VerifyConfig } from "./types.ts";

/** A stable fingerprint of the trust material, so stored verdicts can be re-checked when trust changes. */
export function trustFingerprint(cfg: VerifyConfig): string {
  const material = {
    threshold: cfg.threshold,
    platforms: cfg.platforms,
    keys: cfg.keys.map((k) => `${k.name}=${k.fingerprint}`).sort(),
    sigstore: cfg.sigstore && {
      root: canonical(cfg.sigstore.trustedRoot),
      identities: cfg.sigstore.identities,
      tlog: cfg.sigstore.tlogThreshold,
      ctlog: cfg.sigstore.ctlogThreshold,
    },
    notation: cfg.notation && {
      roots: [...cfg.notation.roots].sort(),
      identities: [...cfg.notation.identities].sort(),
    },
  };
  return "sha256:" + createHash("sha256").update(canonical(material)).digest("hex");
}

/** JSON with object keys sorted, so equal material hashes equal whatever order it was read in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return `{${
      Object.keys(o).sort().filter((k) => o[k] !== undefined)
        .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(",")
    }}`;
  }
  return JSON.stringify(v) ?? "null";
}
