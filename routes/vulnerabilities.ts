// `/v2/<ns>/_svc/vulnerabilities/<digest|tag>` (image reports, docs/api.md#image-reports): parse
// the query, call lib/scan, write the answer in the asked format. Bad query values are 404, as on
// every extension GET.
import { isValidTag, parseDigest, RegistryError } from "../lib/oci/mod.ts";
import {
  DIFF_DEFAULT_N,
  DIFF_MAX_N,
  type Finding,
  type ImageReport,
  reportCsv,
  reportCycloneDx,
  reportSpdx,
  SEVERITIES,
  type Severity,
  SEVERITY_RANK,
} from "../lib/scan/mod.ts";
import { jsonResponse } from "./request.ts";
import { extensionQueryError, type Query } from "./query.ts";
import type { RequestScope } from "./scope.ts";

const badQuery = extensionQueryError;
const FORMATS = ["json", "csv", "cyclonedx", "spdx"] as const;
const SORTS = ["severity", "package", "id"] as const;

export interface ReportQuery {
  format: typeof FORMATS[number];
  severities: Set<Severity> | null;
  sort: typeof SORTS[number];
}

export function parseReportQuery(query: Query): ReportQuery {
  const format = (query.one("format") ?? "json").toLowerCase();
  if (!(FORMATS as readonly string[]).includes(format)) {
    throw badQuery(`format must be one of ${FORMATS.join(", ")}`);
  }
  const sev = query.one("severity");
  let severities: Set<Severity> | null = null;
  if (sev !== null) {
    severities = new Set();
    for (const s of sev.split(",")) {
      const v = s.trim().toUpperCase();
      if (!(SEVERITIES as readonly string[]).includes(v)) {
        throw badQuery(`severity must be a list of ${SEVERITIES.join(", ")}`);
      }
      severities.add(v as Severity);
    }
  }
  const sort = (query.one("sort") ?? "severity").toLowerCase();
  if (!(SORTS as readonly string[]).includes(sort)) {
    throw badQuery(`sort must be one of ${SORTS.join(", ")}`);
  }
  return {
    format: format as ReportQuery["format"],
    severities,
    sort: sort as ReportQuery["sort"],
  };
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function findingsOf(report: ImageReport, q: ReportQuery): Finding[] {
  const f = report.findings.filter((x) => !q.severities || q.severities.has(x.severity));
  const bySeverity = (a: Finding, b: Finding) =>
    SEVERITY_RANK[a.severity] - SEVERITY_RANK[b.severity];
  if (q.sort === "package") {
    f.sort((a, b) => cmp(a.package, b.package) || bySeverity(a, b) || cmp(a.id, b.id));
  } else if (q.sort === "id") f.sort((a, b) => cmp(a.id, b.id) || cmp(a.package, b.package));
  else f.sort((a, b) => bySeverity(a, b) || cmp(a.package, b.package) || cmp(a.id, b.id));
  return f;
}

export async function vulnerabilitiesHandler(
  { url, query, action: a, services: { reports }, registry: reg, headers: extra, head }:
    RequestScope,
): Promise<Response> {
  if (!reports) throw new RegistryError("NAME_UNKNOWN", "image reports are not enabled");
  const q = parseReportQuery(query);
  const digest = a.digest ?? (await reg.manifests.resolve(a.namespace!, a.tag!)).digest;
  const r = await reports.report(a.namespace!, digest);
  if (r.status === 202) {
    extra.set("Content-Type", "application/json");
    extra.set("Retry-After", "2");
    return new Response(head ? null : JSON.stringify({ status: "scanning" }), {
      status: 202,
      headers: extra,
    });
  }
  if (r.kind === "index") {
    if (q.format !== "json") throw badQuery(`an index has no ${q.format} report: ask a platform`);
    return jsonResponse({ digest: r.digest, manifests: r.manifests }, extra, head);
  }
  const report = { ...r.report, findings: findingsOf(r.report, q) };
  switch (q.format) {
    case "csv": {
      extra.set("Content-Type", "text/csv; charset=utf-8");
      return new Response(head ? null : reportCsv(report), {
        status: 200,
        headers: extra,
      });
    }
    case "cyclonedx":
      extra.set("Content-Type", "application/vnd.cyclonedx+json");
      return new Response(head ? null : JSON.stringify(reportCycloneDx(report)), {
        status: 200,
        headers: extra,
      });
    case "spdx":
      extra.set("Content-Type", "application/spdx+json");
      return new Response(
        head ? null : JSON.stringify(reportSpdx(report, `${url.origin}/v2/${a.namespace}/sbom`)),
        { status: 200, headers: extra },
      );
    default:
      return jsonResponse({ ...report, refreshing: r.refreshing }, extra, head);
  }
}

/** `/v2/<ns>/_svc/diff?from=<ref>&to=<ref>[&n=]` (docs/api.md#image-diff). */
export async function diffHandler(
  { query, action: a, services: { reports }, headers: extra, head }: RequestScope,
): Promise<Response> {
  if (!reports) throw new RegistryError("NAME_UNKNOWN", "image reports are not enabled");
  const from = query.one("from"), to = query.one("to");
  if (from === null || to === null) throw badQuery("from and to are required");
  for (const ref of [from, to]) {
    if (!(ref.includes(":") ? parseDigest(ref) : isValidTag(ref))) {
      throw badQuery(`invalid reference ${JSON.stringify(ref.slice(0, 100))}`);
    }
  }
  const n = query.count("n", DIFF_DEFAULT_N, { digits: 9, min: 1, max: DIFF_MAX_N });
  const r = await reports.diff(a.namespace!, from, to, n);
  if (r.status === 202) {
    extra.set("Content-Type", "application/json");
    extra.set("Retry-After", "1");
    return new Response(head ? null : JSON.stringify({ status: "indexing" }), {
      status: 202,
      headers: extra,
    });
  }
  return jsonResponse(r.diff, extra, head);
}
