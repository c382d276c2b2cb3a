// Matching an image's packages against the advisory snapshot: each package's findings in the
// ecosystems it belongs to (the distro release's, or its language's), ordered by severity, and
// why a report was not checked at all when no records could apply.
import { type Affected, affects, SEVERITIES, type Severity } from "./osv.ts";
import { type AdvisoryMeta, type AdvisoryStore, lookupName } from "./advisory_store.ts";
import type { Package } from "./package_dbs.ts";
import { advisoryEcosystems, type OsInfo } from "./os_release.ts";
import { compareVersions, type VersionScheme } from "./vercmp.ts";
import { imageEcosystems } from "./ecosystems.ts";
import type { Finding } from "./image_report.ts";

export const SEVERITY_RANK: Record<Severity, number> = {
  CRITICAL: 0,
  HIGH: 1,
  MEDIUM: 2,
  LOW: 3,
  UNKNOWN: 4,
};

const SCHEMES: Record<Package["type"], VersionScheme> = {
  deb: "dpkg",
  apk: "apk",
  rpm: "rpm",
  npm: "semver",
  pypi: "pep440",
};

/** OSV's ecosystem for each language package type (distro packages go by the OS release). */
export const LANGUAGE_ECOSYSTEMS: Partial<Record<Package["type"], string>> = {
  npm: "npm",
  pypi: "PyPI",
};

function schemeOf(p: Package): VersionScheme {
  return SCHEMES[p.type];
}

export const zeroCounts = (): Record<Severity, number> =>
  Object.fromEntries(SEVERITIES.map((s) => [s, 0])) as Record<Severity, number>;

/** CVE ids a record stands for: its own id when a CVE, and its CVE aliases. */
function cves(a: Affected): string[] {
  return [a.id, ...a.aliases].filter((x) => /^CVE-\d{4}-\d+$/.test(x));
}

/**
 * Findings of one package against advisories from `ecosystems` (most specific first). A CVE
 * already covered by a record of a more specific ecosystem (the distro release's own) is not
 * reported again from a more general one.
 */
export function matchPackage(
  pkg: Package,
  byEcosystem: Array<{ ecosystem: string; entries: Affected[] }>,
): Finding[] {
  const scheme = schemeOf(pkg);
  const installed = pkg.type === "deb" ? (pkg.source_version ?? pkg.version) : pkg.version;
  const compare = (a: string, b: string) => compareVersions(scheme, a, b);
  const out: Finding[] = [];
  const covered = new Set<string>();
  const seen = new Set<string>();
  for (const { ecosystem, entries } of byEcosystem) {
    const here: string[] = [];
    for (const a of entries) {
      if (seen.has(a.id)) continue;
      const ids = cves(a);
      if (ids.length > 0 && ids.every((c) => covered.has(c))) continue;
      let r;
      try {
        r = affects(a, installed, compare);
      } catch {
        continue; // a version the scheme cannot order is no evidence either way
      }
      if (!r.affected) continue;
      seen.add(a.id);
      here.push(...ids);
      out.push({
        id: a.id,
        aliases: a.aliases,
        severity: a.severity,
        package: pkg.name,
        installed: pkg.version,
        fixed: r.fixed,
        summary: a.summary,
        references: a.references,
        advisory_package: a.package,
        ecosystem,
      });
    }
    for (const c of here) covered.add(c);
  }
  return out;
}

/**
 * Why a report's packages were not matched against any advisory record, or null when they were
 * (an image of no packages, with advisory data loaded, is checked: there was nothing to find).
 * A report that matched nothing must never read as "no known vulnerabilities".
 */
export function uncheckedReason(
  adv: AdvisoryMeta | null,
  os: OsInfo | null,
  packages: Package[],
): string | null {
  if (!adv) return "no advisory data is loaded";
  if (adv.records === 0) return "the advisory snapshot holds no records";
  if (packages.length === 0) return null;
  const has = (e: string) => (adv.ecosystems[e] ?? 0) > 0;
  const distro = os ? advisoryEcosystems(os) : [];
  const covered = packages.some((p) => {
    const lang = LANGUAGE_ECOSYSTEMS[p.type];
    return lang ? has(lang) : distro.some(has);
  });
  if (covered) return null;
  const wanted = imageEcosystems(os, packages.flatMap((p) => LANGUAGE_ECOSYSTEMS[p.type] ?? []));
  return `the advisory snapshot holds no records for ${
    wanted.length > 0 ? wanted.join(", ") : "this image's packages"
  }`;
}

export function sortFindings(f: Finding[]): Finding[] {
  return f.sort((a, b) =>
    SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity] ||
    (a.package < b.package ? -1 : a.package > b.package ? 1 : 0) ||
    (a.id < b.id ? -1 : a.id > b.id ? 1 : 0) ||
    // two copies of one package (npm nests them): by version, then as listed
    (a.installed < b.installed ? -1 : a.installed > b.installed ? 1 : 0)
  );
}

/** The findings of `packages` in the snapshot `adv` names. */
export async function matchAdvisories(
  advisories: Pick<AdvisoryStore, "lookup">,
  adv: AdvisoryMeta,
  os: OsInfo | null,
  packages: Package[],
): Promise<Finding[]> {
  const distro = os ? advisoryEcosystems(os).filter((e) => adv.ecosystems[e]) : [];
  const out: Finding[] = [];
  for (const pkg of packages) {
    const lang = LANGUAGE_ECOSYSTEMS[pkg.type];
    const ecosystems = lang ? (adv.ecosystems[lang] ? [lang] : []) : distro;
    if (ecosystems.length === 0) continue;
    const names = [...new Set([pkg.source_name ?? pkg.name, pkg.name])];
    const byEcosystem = [];
    for (const ecosystem of ecosystems) {
      const entries: Affected[] = [];
      for (const n of names) {
        entries.push(
          ...await advisories.lookup(adv.snapshot, ecosystem, lookupName(ecosystem, n)),
        );
      }
      byEcosystem.push({ ecosystem, entries });
    }
    out.push(...matchPackage(pkg, byEcosystem));
  }
  return out;
}
