export * from "./keys.ts";
export { BlobMeta } from "./blobs.ts";
export { ManifestMeta, type ManifestWrite } from "./manifests.ts";
export { UploadMeta } from "./uploads.ts";

/** Opens the KV file (or KV Connect URL) that holds all metadata. */
export async function openMetadata(path: string): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path)) {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    if (dir) await Deno.mkdir(dir, { recursive: true });
  }
  return await Deno.openKv(path);
}
