// A signature artifact's manifest and blobs, read within bounds.
import { createHash } from "node:crypto";
import { type Descriptor, parseDescriptor } from "../oci/mod.ts";
import { boundedJson, isObject } from "./json.ts";
import { Refused } from "./limits.ts";
import { LIMITS } from "./limits.ts";
import type { SignatureArtifact } from "./types.ts";

export interface ArtifactManifest {
  artifactType?: string;
  layers: Descriptor[];
  annotations: Record<string, string>;
}

/** The artifact's manifest: its layers (at most `maxLayers`, more is refused) as descriptors. */
export function artifactManifest(art: SignatureArtifact, maxLayers: number): ArtifactManifest {
  const doc = boundedJson(art.manifest, LIMITS.manifestBytes, "the signature manifest");
  if (!isObject(doc) || !Array.isArray(doc.layers)) {
    throw new Refused("the signature manifest has no layers");
  }
  if (doc.layers.length === 0) throw new Refused("the signature manifest has no layers");
  if (doc.layers.length > maxLayers) {
    throw new Refused(`the signature manifest has more than ${maxLayers} layers`);
  }
  let layers: Descriptor[];
  try {
    layers = doc.layers.map((l, i) => parseDescriptor(l, `layers[${i}]`));
  } catch (e) {
    throw new Refused(`the signature manifest is malformed: ${(e as Error).message}`);
  }
  const annotations = isObject(doc.annotations) ? doc.annotations as Record<string, string> : {};
  return {
    artifactType: typeof doc.artifactType === "string" ? doc.artifactType : undefined,
    layers,
    annotations,
  };
}

/** A layer's bytes, refused when declared or read larger than `max` or not matching its digest. */
export async function readLayer(
  art: SignatureArtifact,
  layer: Descriptor,
  max: number,
  what: string,
): Promise<Uint8Array> {
  if (layer.size > max) throw new Refused(`${what} is larger than ${max} bytes`);
  let bytes: Uint8Array;
  try {
    bytes = await art.readBlob(layer.digest, max);
  } catch (e) {
    throw new Refused(`${what} ${layer.digest} cannot be read: ${(e as Error).message}`);
  }
  if (bytes.byteLength > max) throw new Refused(`${what} is larger than ${max} bytes`);
  const hex = createHash("sha256").update(bytes).digest("hex");
  if (layer.digest !== `sha256:${hex}`) {
    throw new Refused(`${what} does not match its digest ${layer.digest}`);
  }
  return bytes;
}

/** The hex of a `sha256:<hex>` digest, or null. */
export function sha256Hex(digest: string): string | null {
  const m = /^sha256:([a-f0-9]{64})$/.exec(digest);
  return m ? m[1] : null;
}
