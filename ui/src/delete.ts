// Deleting from the UI (SPEC UI behaviour 3-4). The registry's DELETE is per manifest; the UI
// removes an index together with its platform manifests that carry no tag and that no other index
// names, and with the referrers of everything it removes (transitively: a signature's attestation
// goes with the signature).
import { ApiError, apiFetch, checked, getJson, nsPath, type Revision } from "./api.ts";
import type { FetchedManifest } from "./oci.ts";

async function revisions(namespace: string): Promise<Revision[]> {
  try {
    return (await getJson<{ manifests: Revision[] }>(
      `/v2/${nsPath(namespace)}/_svc/revisions/list`,
    )).manifests;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return [];
    throw e;
  }
}

/** The digests a delete of `target` removes, in the order they are deleted. */
export function cascade(target: FetchedManifest, revs: Revision[]): string[] {
  const byDigest = new Map(revs.map((r) => [r.digest, r]));
  const removed = [target.digest];
  for (const child of target.manifest.manifests ?? []) {
    const rev = byDigest.get(child.digest);
    if (!rev || removed.includes(child.digest) || rev.tags.length > 0) continue;
    if ((rev.parents ?? []).every((p) => p.digest === target.digest)) {
      removed.push(child.digest);
    }
  }
  for (let i = 0; i < removed.length; i++) {
    for (const r of byDigest.get(removed[i])?.referrers ?? []) {
      if (!removed.includes(r.digest)) removed.push(r.digest);
    }
  }
  return removed;
}

async function deleteManifest(namespace: string, reference: string) {
  const r = await apiFetch(
    `/v2/${nsPath(namespace)}/manifests/${reference}`,
    { method: "DELETE" },
  );
  // already gone (another tab, or a cascade that reached it first) is what was wanted
  if (r.status === 404) return;
  await checked(r);
  await r.body?.cancel();
}

/** Deletes a manifest with its cascade; returns the digests removed. */
export async function deleteWithCascade(
  namespace: string,
  target: FetchedManifest,
): Promise<string[]> {
  const order = cascade(target, await revisions(namespace));
  for (const digest of order) await deleteManifest(namespace, digest);
  return order;
}

export async function deleteTag(namespace: string, tag: string) {
  await deleteManifest(namespace, tag);
}
