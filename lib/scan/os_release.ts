// Which OS an image is, from its release files, and the OSV ecosystems its packages are published
// under (https://ossf.github.io/osv-schema/#affectedpackage-field).

export interface OsInfo {
  id: string;
  version_id: string | null;
  pretty_name: string | null;
  version_codename: string | null;
  id_like: string[];
}

/** Characters of a release file read: real ones are a few hundred bytes. */
export const MAX_RELEASE_FILE = 64 * 1024;
/**
 * Characters kept of each field: the OS is stored in the scan record (a KV value of at most
 * 64 KiB) and shown in reports; real values are a few dozen characters.
 */
export const MAX_OS_FIELD_CHARS = 256;

export interface OsReleaseLimits {
  /** characters of a release file read (its head) */
  maxReleaseFileBytes?: number;
  /** characters kept of each field */
  maxOsFieldChars?: number;
}

/** `os-release(5)`: shell-style assignments; quotes and backslash escapes undone. */
export function parseOsRelease(text: string, opts: OsReleaseLimits = {}): OsInfo | null {
  const head = opts.maxReleaseFileBytes ?? MAX_RELEASE_FILE;
  const max = opts.maxOsFieldChars ?? MAX_OS_FIELD_CHARS;
  const vars = new Map<string, string>();
  for (const raw of text.slice(0, head).split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq <= 0) continue;
    const key = line.slice(0, eq);
    if (!/^[A-Z_][A-Z0-9_]*$/.test(key)) continue;
    let v = line.slice(eq + 1);
    if (v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0])) {
      const q = v[0];
      v = v.slice(1, -1);
      if (q === '"') v = v.replace(/\\([\\"$`])/g, "$1");
    }
    vars.set(key, v.slice(0, max));
  }
  const id = vars.get("ID")?.toLowerCase();
  if (!id) return null;
  return {
    id,
    version_id: vars.get("VERSION_ID") ?? null,
    pretty_name: vars.get("PRETTY_NAME") ?? null,
    version_codename: vars.get("VERSION_CODENAME") ?? null,
    id_like: (vars.get("ID_LIKE") ?? "").split(/\s+/).filter(Boolean).map((s) => s.toLowerCase()),
  };
}

const os = (id: string, version_id: string | null, pretty: string | null): OsInfo => ({
  id,
  version_id,
  pretty_name: pretty,
  version_codename: null,
  id_like: [],
});

/** The OS from `os-release`, else from the distro's own release file. */
export function osFromReleaseFiles(
  files: Map<string, string>,
  opts: OsReleaseLimits = {},
): OsInfo | null {
  const head = opts.maxReleaseFileBytes ?? MAX_RELEASE_FILE;
  const max = opts.maxOsFieldChars ?? MAX_OS_FIELD_CHARS;
  const get = (p: string) => files.get(p)?.slice(0, head);
  for (const p of ["etc/os-release", "usr/lib/os-release"]) {
    const t = get(p);
    const info = t === undefined ? null : parseOsRelease(t, opts);
    if (info) return info;
  }
  const deb = get("etc/debian_version")?.trim().slice(0, max);
  if (deb && /^\d+(\.\d+)*$/.test(deb)) return os("debian", deb.split(".")[0], `Debian ${deb}`);
  const alp = get("etc/alpine-release")?.trim().slice(0, max);
  if (alp && /^\d+\.\d+/.test(alp)) {
    return os("alpine", /^\S*/.exec(alp)![0], `Alpine Linux v${alp}`.slice(0, max));
  }
  for (
    const [p, id] of [
      ["etc/rocky-release", "rocky"],
      ["etc/almalinux-release", "almalinux"],
      ["etc/centos-release", "centos"],
      ["etc/fedora-release", "fedora"],
      ["etc/redhat-release", "rhel"],
    ] as const
  ) {
    const t = get(p)?.trim().split("\n", 1)[0].slice(0, max);
    const m = t ? /release\s+(\d+(?:\.\d+)*)/i.exec(t) : null;
    if (t && m) return os(id, m[1], t.slice(0, 200));
  }
  return null;
}

/** The OSV ecosystems an image's OS packages are published under, most specific first. */
export function advisoryEcosystems(info: OsInfo): string[] {
  const v = info.version_id ?? "";
  const major = v.split(".")[0];
  const ids = [info.id, ...info.id_like];
  switch (info.id) {
    case "debian":
      return major ? [`Debian:${major}`, "Debian"] : ["Debian"];
    case "ubuntu":
      // osv.dev names LTS releases `Ubuntu:22.04:LTS` and others `Ubuntu:23.10`; Pro ones
      // `Ubuntu:Pro:…`. Both spellings are looked up.
      return v ? [`Ubuntu:${v}:LTS`, `Ubuntu:${v}`, "Ubuntu"] : ["Ubuntu"];
    case "alpine": {
      const mm = v.split(".").slice(0, 2).join(".");
      return mm ? [`Alpine:v${mm}`, "Alpine"] : ["Alpine"];
    }
    case "rocky":
      return major ? [`Rocky Linux:${major}`, "Rocky Linux"] : ["Rocky Linux"];
    case "almalinux":
      return major ? [`AlmaLinux:${major}`, "AlmaLinux"] : ["AlmaLinux"];
    case "rhel":
    case "centos":
      return ["Red Hat"];
    case "opensuse-leap":
      return v ? [`openSUSE:Leap ${v}`, "openSUSE"] : ["openSUSE"];
    case "sles":
      return ["SUSE"];
    case "wolfi":
      return ["Wolfi"];
    case "chainguard":
      return ["Chainguard"];
    default:
      if (ids.includes("debian")) return major ? [`Debian:${major}`, "Debian"] : ["Debian"];
      if (ids.includes("alpine")) return ["Alpine"];
      return [];
  }
}
