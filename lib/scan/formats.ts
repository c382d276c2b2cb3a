// A report in the formats other tools read: the findings as CSV, the package inventory as a
// CycloneDX 1.5 or SPDX 2.3 JSON SBOM, each package named by its package URL (purl). A report
// whose packages were matched against no advisory record says so in each, where that format's
// readers look: an empty list of findings there is "not checked", never "clean".
import type { ImageReport } from "./image_report.ts";
import type { Package } from "./package_dbs.ts";
import type { ConfigSecret } from "./config_secrets.ts";
import { describeSecretKind } from "../index/mod.ts";

const PURL_TYPE: Record<Package["type"], string> = {
  deb: "deb",
  apk: "apk",
  rpm: "rpm",
  npm: "npm",
  pypi: "pypi",
};

/** purl-spec: percent-encode everything but the unreserved characters. */
const enc = (s: string) =>
  encodeURIComponent(s).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );

export function purl(p: Package, report: Pick<ImageReport, "os">): string {
  // purl-spec: an npm scope is the namespace; a PyPI name is lowercased with `_` as `-`.
  if (p.type === "npm") {
    const slash = p.name.startsWith("@") ? p.name.indexOf("/") : -1;
    return slash > 0
      ? `pkg:npm/${enc(p.name.slice(0, slash))}/${enc(p.name.slice(slash + 1))}@${enc(p.version)}`
      : `pkg:npm/${enc(p.name)}@${enc(p.version)}`;
  }
  if (p.type === "pypi") {
    return `pkg:pypi/${enc(p.name.toLowerCase().replaceAll("_", "-"))}@${enc(p.version)}`;
  }
  const ns = report.os?.id ?? (p.type === "deb" ? "debian" : p.type === "apk" ? "alpine" : "rpm");
  const q: string[] = [];
  if (p.arch) q.push(`arch=${enc(p.arch)}`);
  if (report.os?.version_id) q.push(`distro=${enc(`${report.os.id}-${report.os.version_id}`)}`);
  if (p.source_name && p.source_name !== p.name) {
    q.push(`upstream=${enc(p.source_name)}`);
  }
  return `pkg:${PURL_TYPE[p.type]}/${enc(ns)}/${enc(p.name)}@${enc(p.version)}${
    q.length ? `?${q.join("&")}` : ""
  }`;
}

/** RFC 4180 field; a leading formula character is defused so spreadsheets show it as text. */
function csvField(v: string): string {
  const s = /^[=+\-@\t\r]/.test(v) ? `'${v}` : v;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

type CheckedFields = Pick<ImageReport, "advisories" | "not_checked"> & {
  /** absent in reports written before it existed */
  vulnerabilities_checked?: boolean;
};

/**
 * Why a report's packages were not matched against advisories, or null when they were. A report
 * written before `vulnerabilities_checked` existed counts as checked only when it names a
 * snapshot holding records.
 */
export function notCheckedReason(report: CheckedFields): string | null {
  if (report.vulnerabilities_checked === true) return null;
  if (report.vulnerabilities_checked === false) {
    return report.not_checked ?? "no advisory record was matched";
  }
  if (!report.advisories) return "no advisory data is loaded";
  return report.advisories.records > 0 ? null : "the advisory snapshot holds no records";
}

/** The sentence each format carries for a report that was not checked. */
const notCheckedText = (reason: string) => `vulnerabilities not checked: ${reason}`;

/**
 * A credential in the config, in words: its kind (SPEC's name, literal), what that kind matches
 * and where it is ("cloudA-credentials (cloud secret access key — a secret access key line set
 * to a 40-character key) in environment variable AWS_SECRET_ACCESS_KEY").
 */
export function configSecretText(s: ConfigSecret): string {
  const what = describeSecretKind(s.kind);
  return `${s.kind}${what ? ` (${what})` : ""} in ${
    s.source === "env" ? `environment variable ${s.name ?? ""}` : `history line ${s.index + 1}`
  }`;
}

/**
 * The findings, one per row. A report not checked has one row saying so instead (id
 * NOT-CHECKED, severity UNKNOWN): a header alone would read as "no vulnerabilities". Each
 * credential in the config follows as a row of its own (id SECRET, severity UNKNOWN: Wharf rates
 * no credential), whatever the severity filter, since it is not a finding of a severity.
 */
export function reportCsv(
  report: Pick<ImageReport, "findings"> & CheckedFields & { config_secrets?: ConfigSecret[] },
): string {
  const cols = ["id", "severity", "package", "installed", "fixed", "aliases", "summary"];
  const reason = notCheckedReason(report);
  const rows = report.findings.map((f) =>
    [f.id, f.severity, f.package, f.installed, f.fixed ?? "", f.aliases.join(" "), f.summary]
      .map(csvField)
      .join(",")
  );
  if (reason !== null) {
    rows.unshift(
      ["NOT-CHECKED", "UNKNOWN", "", "", "", "", notCheckedText(reason)].map(csvField).join(","),
    );
  }
  for (const secret of report.config_secrets ?? []) {
    rows.push(
      ["SECRET", "UNKNOWN", "", "", "", "", configSecretText(secret)].map(csvField).join(","),
    );
  }
  return [cols.join(","), ...rows].join("\r\n") + "\r\n";
}

export function reportCycloneDx(report: ImageReport): Record<string, unknown> {
  // The packages a finding affects, by name and version: looked up once per finding. Filtering
  // every package for every finding took 5-8 s of the serving thread for 25,000 packages and
  // 20,000 findings.
  const refs = new Map<string, { ref: string }[]>();
  for (const p of report.packages) {
    const k = `${p.name}\0${p.version}`;
    const list = refs.get(k) ?? [];
    list.push({ ref: purl(p, report) });
    refs.set(k, list);
  }
  const reason = notCheckedReason(report);
  const wharf = { type: "application", name: "wharf" };
  return {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    serialNumber: `urn:uuid:${crypto.randomUUID()}`,
    version: 1,
    metadata: {
      timestamp: report.scanned_at,
      tools: { components: [wharf] },
      component: { type: "container", name: report.digest, "bom-ref": report.digest },
      properties: [
        { name: "wharf:vulnerabilities:checked", value: String(reason === null) },
        ...(reason === null ? [] : [{ name: "wharf:vulnerabilities:not_checked", value: reason }]),
        ...(report.advisories
          ? [{ name: "wharf:advisories:snapshot", value: report.advisories.snapshot }]
          : []),
      ],
    },
    // A consumer reading only `vulnerabilities` finds none when not checked (absent, not empty:
    // an empty array is a clean result) and an annotation on the image saying why.
    ...(reason === null ? {} : {
      annotations: [{
        subjects: [report.digest],
        annotator: { component: wharf },
        timestamp: report.scanned_at,
        text: notCheckedText(reason),
      }],
    }),
    components: report.packages.map((p) => ({
      type: "library",
      "bom-ref": purl(p, report),
      name: p.name,
      version: p.version,
      purl: purl(p, report),
      properties: [
        ...(p.source_name ? [{ name: "source_name", value: p.source_name }] : []),
        ...(p.source_version ? [{ name: "source_version", value: p.source_version }] : []),
        { name: "location", value: p.location },
      ],
    })),
    ...(reason !== null ? {} : {
      vulnerabilities: report.findings.map((f) => ({
        id: f.id,
        ratings: [{
          severity: f.severity.toLowerCase() === "unknown" ? "unknown" : f.severity.toLowerCase(),
        }],
        description: f.summary,
        affects: refs.get(`${f.package}\0${f.installed}`) ?? [],
        ...(f.references.length ? { advisories: f.references.map((url) => ({ url })) } : {}),
      })),
    }),
  };
}

export function reportSpdx(report: ImageReport, namespaceUrl: string): Record<string, unknown> {
  const id = (i: number) => `SPDXRef-Package-${i}`;
  const created = report.scanned_at.replace(/\.\d+Z$/, "Z");
  // SPDX carries no findings: a report not checked says so in the document's comment and in an
  // annotation of the image, so the SBOM is not taken for a checked image's.
  const reason = notCheckedReason(report);
  const text = reason === null ? null : notCheckedText(reason);
  return {
    spdxVersion: "SPDX-2.3",
    dataLicense: "CC0-1.0",
    SPDXID: "SPDXRef-DOCUMENT",
    name: report.digest,
    documentNamespace: `${namespaceUrl}/${crypto.randomUUID()}`,
    creationInfo: { created, creators: ["Tool: wharf"] },
    ...(text === null ? {} : { comment: text }),
    packages: [
      {
        SPDXID: "SPDXRef-Image",
        name: report.digest,
        downloadLocation: "NOASSERTION",
        primaryPackagePurpose: "CONTAINER",
        ...(text === null ? {} : {
          annotations: [{
            annotationDate: created,
            annotationType: "OTHER",
            annotator: "Tool: wharf",
            comment: text,
          }],
        }),
      },
      ...report.packages.map((p, i) => ({
        SPDXID: id(i),
        name: p.name,
        versionInfo: p.version,
        downloadLocation: "NOASSERTION",
        ...(p.source_name
          ? { sourceInfo: `built from ${p.source_name} ${p.source_version ?? ""}`.trim() }
          : {}),
        externalRefs: [{
          referenceCategory: "PACKAGE-MANAGER",
          referenceType: "purl",
          referenceLocator: purl(p, report),
        }],
      })),
    ],
    relationships: [
      {
        spdxElementId: "SPDXRef-DOCUMENT",
        relationshipType: "DESCRIBES",
        relatedSpdxElement: "SPDXRef-Image",
      },
      ...report.packages.map((_, i) => ({
        spdxElementId: "SPDXRef-Image",
        relationshipType: "CONTAINS",
        relatedSpdxElement: id(i),
      })),
    ],
  };
}
