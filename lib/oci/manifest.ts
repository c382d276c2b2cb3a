// Parses and validates a pushed manifest body, and extracts what the metadata layer records:
// the blobs and child manifests it references, its subject and its artifact type.
import { RegistryError } from "./errors.ts";
import { bareMediaType, isMediaType, parseDigest } from "./grammar.ts";
import { IMAGE_TYPES, INDEX_TYPES } from "./media_types.ts";

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
  platform?: Platform;
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface ParsedManifest {
  mediaType: string;
  /** config + layers (image) */
  blobs: string[];
  /** the size each of `blobs` is declared with (set by parseManifest) */
  blobSizes?: ReadonlyMap<string, number>;
  /** the layers alone, with their media types (the layer index picks the tar ones) */
  layers: { digest: string; mediaType: string }[];
  /** manifests (index) */
  children: { digest: string; platform?: Platform }[];
  subject?: string;
  artifactType?: string;
  annotations?: Record<string, string>;
}

const invalid = (detail: string) => new RegistryError("MANIFEST_INVALID", detail);

function descriptor(v: unknown, where: string): Descriptor {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw invalid(`${where}: not an object`);
  }
  const d = v as Record<string, unknown>;
  if (typeof d.mediaType !== "string" || !isMediaType(d.mediaType)) {
    throw invalid(`${where}: invalid mediaType`);
  }
  if (typeof d.digest !== "string" || !parseDigest(d.digest)) {
    throw invalid(`${where}: invalid digest`);
  }
  if (typeof d.size !== "number" || !Number.isSafeInteger(d.size) || d.size < 0) {
    throw invalid(`${where}: invalid size`);
  }
  const out: Descriptor = { mediaType: d.mediaType, digest: d.digest, size: d.size };
  if (d.artifactType !== undefined) {
    if (typeof d.artifactType !== "string" || !isMediaType(d.artifactType)) {
      throw invalid(`${where}: invalid artifactType`);
    }
    out.artifactType = d.artifactType;
  }
  if (d.annotations !== undefined) out.annotations = annotations(d.annotations, where);
  if (d.platform !== undefined) {
    const p = d.platform as Record<string, unknown>;
    if (
      typeof p !== "object" || p === null || typeof p.os !== "string" ||
      typeof p.architecture !== "string"
    ) {
      throw invalid(`${where}: invalid platform`);
    }
    out.platform = { os: p.os, architecture: p.architecture };
    if (typeof p.variant === "string") out.platform.variant = p.variant;
  }
  return out;
}

function annotations(v: unknown, where: string): Record<string, string> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw invalid(`${where}: invalid annotations`);
  }
  for (const [, val] of Object.entries(v)) {
    if (typeof val !== "string") throw invalid(`${where}: annotation values must be strings`);
  }
  return v as Record<string, string>;
}

/** One descriptor (of a referrers index, say); MANIFEST_INVALID naming `where` if malformed. */
export const parseDescriptor: (v: unknown, where: string) => Descriptor = descriptor;

function descriptorList(v: unknown, where: string): Descriptor[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw invalid(`${where}: not an array`);
  return v.map((d, i) => descriptor(d, `${where}[${i}]`));
}

/**
 * Validates `body` as pushed with `contentType` (may be null). SPEC §Manifests rule 6: a
 * Content-Type disagreeing with the body's own mediaType is MANIFEST_INVALID; parameters are
 * ignored and the bare type is what gets stored.
 */
export function parseManifest(body: Uint8Array, contentType: string | null): ParsedManifest {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw invalid("manifest is not valid UTF-8 JSON");
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) {
    throw invalid("manifest is not a JSON object");
  }
  const m = doc as Record<string, unknown>;
  if (m.schemaVersion !== 2) throw invalid("schemaVersion must be 2");
  const header = contentType ? bareMediaType(contentType) : "";
  if (header && !isMediaType(header)) throw invalid("invalid Content-Type");
  let mediaType: string;
  if (m.mediaType !== undefined) {
    if (typeof m.mediaType !== "string" || !isMediaType(m.mediaType)) {
      throw invalid("invalid mediaType");
    }
    if (header && header !== m.mediaType.toLowerCase()) {
      throw invalid(`Content-Type ${header} disagrees with mediaType ${m.mediaType}`);
    }
    mediaType = m.mediaType;
  } else if (header) {
    mediaType = header;
  } else {
    throw invalid("manifest has no media type");
  }

  const out: ParsedManifest = { mediaType, blobs: [], layers: [], children: [] };
  const isIndex = INDEX_TYPES.has(mediaType) ||
    (!IMAGE_TYPES.has(mediaType) && Array.isArray(m.manifests));
  if (isIndex) {
    if (!Array.isArray(m.manifests)) throw invalid("index has no manifests array");
    if (m.config !== undefined || m.layers !== undefined) {
      throw invalid("index carries config or layers");
    }
    for (const d of descriptorList(m.manifests, "manifests")) {
      out.children.push(
        d.platform ? { digest: d.digest, platform: d.platform } : { digest: d.digest },
      );
    }
  } else {
    if (IMAGE_TYPES.has(mediaType) && m.config === undefined) {
      throw invalid("image manifest has no config");
    }
    if (m.manifests !== undefined) throw invalid("image manifest carries manifests");
    const sizes = new Map<string, number>();
    if (m.config !== undefined) {
      const c = descriptor(m.config, "config");
      out.blobs.push(c.digest);
      sizes.set(c.digest, c.size);
    }
    if (IMAGE_TYPES.has(mediaType) && !Array.isArray(m.layers)) {
      throw invalid("image manifest has no layers array");
    }
    for (const d of descriptorList(m.layers, "layers")) {
      out.blobs.push(d.digest);
      sizes.set(d.digest, Math.max(d.size, sizes.get(d.digest) ?? 0));
      out.layers.push({ digest: d.digest, mediaType: d.mediaType });
    }
    out.blobSizes = sizes;
    if (m.artifactType === undefined && m.config !== undefined) {
      const cfg = m.config as Record<string, unknown>;
      // OCI 1.1: the config media type stands in for the artifact type when none is set.
      out.artifactType = cfg.mediaType as string;
    }
  }
  if (m.artifactType !== undefined) {
    if (typeof m.artifactType !== "string" || !isMediaType(m.artifactType)) {
      throw invalid("invalid artifactType");
    }
    out.artifactType = m.artifactType;
  }
  if (m.subject !== undefined) out.subject = descriptor(m.subject, "subject").digest;
  if (m.annotations !== undefined) out.annotations = annotations(m.annotations, "annotations");
  out.blobs = [...new Set(out.blobs)];
  return out;
}
