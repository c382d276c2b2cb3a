// Which detail tab a location hash opens (SPEC §Web UI routes): none opens OCI; `#history`,
// `#vulnerabilities[/<os>/<arch>[/<variant>]]`, `#filesystem[/<path>][@L<n>]`; a tab the manifest
// lacks opens OCI.
export type TabName = "oci" | "history" | "vulnerabilities" | "filesystem";

export function tabOf(hash: string, available: TabName[]): TabName {
  const h = hash.replace(/^#/, "");
  const name = h.split("/")[0] as TabName;
  return (["history", "vulnerabilities", "filesystem"] as TabName[]).includes(
      name,
    ) &&
      available.includes(name)
    ? name
    : "oci";
}

/** `#vulnerabilities/linux/arm/v7` → ["linux", "arm", "v7"]; [] when no platform is named. */
export function vulnPlatform(hash: string): string[] {
  const h = hash.replace(/^#/, "");
  if (!h.startsWith("vulnerabilities/")) return [];
  return h.slice("vulnerabilities/".length).split("/").filter(Boolean).map(
    (s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    },
  );
}
