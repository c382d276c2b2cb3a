// Which of osv.dev's per-ecosystem dumps an image needs. osv.dev publishes one
// `<Ecosystem>/all.zip` per top-level ecosystem: the records of `Debian:12` are in `Debian`'s.
import { advisoryEcosystems, type OsInfo } from "./os_release.ts";

export function topLevelEcosystem(ecosystem: string): string {
  return ecosystem.split(":")[0];
}

/** The dumps holding the advisories of an image's OS and of its language packages. */
export function imageEcosystems(os: OsInfo | null, languages: Iterable<string>): string[] {
  const out = new Set<string>();
  for (const e of os ? advisoryEcosystems(os) : []) out.add(topLevelEcosystem(e));
  for (const e of languages) out.add(topLevelEcosystem(e));
  return [...out].sort();
}

/**
 * The dumps a stored report needs: its own list, or for a record written before reports kept
 * one, what its `os` ("debian 12") implies (its language packages are then not known).
 */
export function recordEcosystems(rec: { ecosystems?: string[]; os: string | null }): string[] {
  if (rec.ecosystems) return rec.ecosystems;
  if (!rec.os) return [];
  const [id, version] = rec.os.split(" ");
  return imageEcosystems({
    id,
    version_id: version ?? null,
    pretty_name: null,
    version_codename: null,
    id_like: [],
  }, []);
}
