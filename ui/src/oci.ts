// OCI content as the UI reads it: manifests by reference, platform badges, sizes.
import { apiFetch, checked, nsPath } from "./api.ts";

export const MT = {
  ociIndex: "application/vnd.oci.image.index.v1+json",
  ociManifest: "application/vnd.oci.image.manifest.v1+json",
  dockerList: "application/vnd.docker.distribution.manifest.list.v2+json",
  dockerManifest: "application/vnd.docker.distribution.manifest.v2+json",
};
const ACCEPT = [MT.ociIndex, MT.ociManifest, MT.dockerList, MT.dockerManifest]
  .join(", ");

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

export interface Manifest {
  schemaVersion?: number;
  mediaType?: string;
  artifactType?: string;
  config?: Descriptor;
  layers?: Descriptor[];
  manifests?: Descriptor[];
  subject?: Descriptor;
  annotations?: Record<string, string>;
}

export interface FetchedManifest {
  digest: string;
  mediaType: string;
  size: number;
  manifest: Manifest;
  raw: string;
}

export async function fetchManifest(
  namespace: string,
  reference: string,
): Promise<FetchedManifest> {
  const r = await checked(
    await apiFetch(
      `/v2/${nsPath(namespace)}/manifests/${reference}`,
      {
        headers: { accept: ACCEPT },
      },
    ),
  );
  const raw = await r.text();
  const manifest = JSON.parse(raw) as Manifest;
  return {
    digest: r.headers.get("docker-content-digest") ?? reference,
    mediaType: manifest.mediaType ?? r.headers.get("content-type") ?? "",
    size: new TextEncoder().encode(raw).length,
    manifest,
    raw,
  };
}

export const isIndex = (m: Manifest) => Array.isArray(m.manifests);

const LAYER_TAR =
  /^application\/vnd\.(oci\.image\.layer\.v1\.tar|docker\.image\.rootfs\.diff\.tar)/;

/** An image whose layers are filesystem tars has a filesystem (and so a vulnerability report). */
export const hasFilesystem = (m: Manifest) =>
  !isIndex(m) && (m.layers ?? []).length > 0 &&
  (m.layers ?? []).every((l) => LAYER_TAR.test(l.mediaType ?? ""));

/** SPEC UI behaviour 12: `linux/amd64`, `linux/arm64`, `linux/arm/v7`, `windows/amd64`, `unknown`. */
export function platformBadge(p: Platform | undefined | null): string {
  if (
    !p || !p.os || !p.architecture || p.os === "unknown" ||
    p.architecture === "unknown"
  ) {
    return "unknown";
  }
  // arm64's only variant is v8: shown as `linux/arm64`, as containerd normalises it
  const variant = p.architecture === "arm64" && p.variant === "v8" ? undefined : p.variant;
  return [p.os, p.architecture, variant].filter(Boolean).join("/");
}

export function humanSize(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${n} B` : `${v.toFixed(v < 10 ? 2 : 1)} ${units[i]}`;
}

/** An image manifest's size as pulled: the manifest, its config and its layers. */
export function imageSize(f: FetchedManifest): number {
  const m = f.manifest;
  return f.size + (m.config?.size ?? 0) +
    (m.layers ?? []).reduce((s, l) => s + (l.size ?? 0), 0);
}

export const shortDigest = (d: string) => d.replace(/^(sha256:|sha512:)/, "$1").slice(0, 19);

/** A blob's bytes as text (a config), fetched inline. */
export async function blobText(
  namespace: string,
  digest: string,
): Promise<string> {
  return await (await checked(
    await apiFetch(`/v2/${nsPath(namespace)}/blobs/${digest}`),
  )).text();
}
