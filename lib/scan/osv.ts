// OSV records (https://ossf.github.io/osv-schema/) cut down to what matching and reports use.
// A record may name many packages; each (ecosystem, package) pair becomes one `Affected`, the
// unit the advisory index stores and a scan looks up.

export type Severity = "CRITICAL" | "HIGH" | "MEDIUM" | "LOW" | "UNKNOWN";
export const SEVERITIES: readonly Severity[] = ["CRITICAL", "HIGH", "MEDIUM", "LOW", "UNKNOWN"];

export interface RangeEvent {
  introduced?: string;
  fixed?: string;
  last_affected?: string;
  limit?: string;
}

/** One advisory as it applies to one package of one ecosystem. */
export interface Affected {
  id: string;
  aliases: string[];
  /** ecosystem as published: `Debian:12`, `Alpine:v3.20`, `Rocky Linux:9` */
  ecosystem: string;
  package: string;
  severity: Severity;
  summary: string;
  references: string[];
  /** ECOSYSTEM ranges (SEMVER and GIT ranges cannot be compared with distro versions) */
  ranges: RangeEvent[][];
  /** versions listed as affected one by one */
  versions: string[];
  modified: string;
}

export class OsvError extends Error {}

const MAX_SUMMARY = 300;
const MAX_REFERENCES = 5;
const MAX_ALIASES = 20;
const MAX_VERSIONS = 500;
const MAX_STRING = 256;

const str = (v: unknown, max = MAX_STRING): string | null =>
  typeof v === "string" && v.length > 0 && v.length <= max ? v : null;

/** Severity from the record: a distro's own rating first, then a CVSS vector's base score. */
export function severityOf(
  rec: Record<string, unknown>,
  affected?: Record<string, unknown>,
): Severity {
  for (
    const src of [affected?.ecosystem_specific, affected?.database_specific, rec.database_specific]
  ) {
    const s = (src as { severity?: unknown } | undefined)?.severity;
    const named = typeof s === "string" ? namedSeverity(s) : null;
    if (named) return named;
  }
  const list = Array.isArray(rec.severity) ? rec.severity : [];
  let best: number | null = null;
  for (const s of list) {
    const score = (s as { score?: unknown })?.score;
    if (typeof score !== "string") continue;
    const n = /^CVSS:3\.[01]\//.test(score) ? cvss3BaseScore(score) : Number.NaN;
    if (Number.isFinite(n) && (best === null || n > best)) best = n;
  }
  if (best === null) return "UNKNOWN";
  if (best >= 9) return "CRITICAL";
  if (best >= 7) return "HIGH";
  if (best >= 4) return "MEDIUM";
  if (best > 0) return "LOW";
  return "UNKNOWN";
}

function namedSeverity(s: string): Severity | null {
  switch (s.trim().toUpperCase()) {
    case "CRITICAL":
      return "CRITICAL";
    case "HIGH":
    case "IMPORTANT":
      return "HIGH";
    case "MEDIUM":
    case "MODERATE":
      return "MEDIUM";
    case "LOW":
    case "NEGLIGIBLE":
    case "UNIMPORTANT":
      return "LOW";
    default:
      return null;
  }
}

const W: Record<string, Record<string, number>> = {
  AV: { N: 0.85, A: 0.62, L: 0.55, P: 0.2 },
  AC: { L: 0.77, H: 0.44 },
  UI: { N: 0.85, R: 0.62 },
  C: { H: 0.56, L: 0.22, N: 0 },
  I: { H: 0.56, L: 0.22, N: 0 },
  A: { H: 0.56, L: 0.22, N: 0 },
};

/** CVSS v3.x base score from a vector (the specification's formula); NaN when malformed. */
export function cvss3BaseScore(vector: string): number {
  const m = new Map<string, string>();
  for (const part of vector.split("/").slice(1)) {
    const [k, v] = part.split(":");
    if (k && v) m.set(k, v);
  }
  const get = (k: string) => W[k]?.[m.get(k) ?? ""];
  const av = get("AV"), ac = get("AC"), ui = get("UI");
  const c = get("C"), i = get("I"), a = get("A");
  const scope = m.get("S");
  const prRaw = m.get("PR");
  if ([av, ac, ui, c, i, a].some((x) => x === undefined) || !prRaw || !scope) return Number.NaN;
  if (scope !== "U" && scope !== "C") return Number.NaN;
  const changed = scope === "C";
  const pr =
    ({ N: 0.85, L: changed ? 0.68 : 0.62, H: changed ? 0.5 : 0.27 } as Record<string, number>)[
      prRaw
    ];
  if (pr === undefined) return Number.NaN;
  const iss = 1 - (1 - c!) * (1 - i!) * (1 - a!);
  const impact = changed ? 7.52 * (iss - 0.029) - 3.25 * Math.pow(iss - 0.02, 15) : 6.42 * iss;
  const exploitability = 8.22 * av! * ac! * pr * ui!;
  if (impact <= 0) return 0;
  const raw = changed
    ? Math.min(1.08 * (impact + exploitability), 10)
    : Math.min(impact + exploitability, 10);
  return roundUp(raw);
}

/** CVSS 3.1 Roundup: the smallest one-decimal number >= x, free of float error. */
function roundUp(x: number): number {
  const n = Math.round(x * 100000);
  return n % 10000 === 0 ? n / 100000 : (Math.floor(n / 10000) + 1) / 10;
}

/** The (ecosystem, package) entries of one OSV record; throws OsvError for a non-record. */
export function parseOsv(text: string): Affected[] {
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch (e) {
    throw new OsvError(`not JSON: ${(e as Error).message.slice(0, 200)}`);
  }
  if (!rec || typeof rec !== "object" || Array.isArray(rec)) throw new OsvError("not an object");
  const r = rec as Record<string, unknown>;
  const id = str(r.id);
  if (!id) throw new OsvError("no id");
  if (typeof r.withdrawn === "string" && r.withdrawn) return [];
  const aliases = (Array.isArray(r.aliases) ? r.aliases : [])
    .map((a) => str(a))
    .filter((a): a is string => a !== null)
    .slice(0, MAX_ALIASES);
  const summaryRaw = str(r.summary, 1 << 20) ?? str(r.details, 1 << 20) ?? "";
  const summary = summaryRaw.split("\n")[0].slice(0, MAX_SUMMARY);
  const references = (Array.isArray(r.references) ? r.references : [])
    .map((x) => str((x as { url?: unknown })?.url, 2048))
    .filter((u): u is string => u !== null)
    .slice(0, MAX_REFERENCES);
  const modified = str(r.modified) ?? "";
  const out: Affected[] = [];
  for (const a of Array.isArray(r.affected) ? r.affected : []) {
    if (!a || typeof a !== "object") continue;
    const pkg = (a as { package?: Record<string, unknown> }).package;
    const ecosystem = str(pkg?.ecosystem);
    const name = str(pkg?.name);
    if (!ecosystem || !name) continue;
    const ranges: RangeEvent[][] = [];
    for (
      const rg of Array.isArray((a as { ranges?: unknown }).ranges)
        ? (a as { ranges: unknown[] }).ranges
        : []
    ) {
      const type = (rg as { type?: unknown })?.type;
      // GIT ranges name commits, which an installed package does not carry. SEMVER ranges (npm,
      // crates, Go) are ordered by the package's own scheme, semver for npm.
      if (type !== "ECOSYSTEM" && type !== "SEMVER") continue;
      const events: RangeEvent[] = [];
      for (
        const ev of Array.isArray((rg as { events?: unknown }).events)
          ? (rg as { events: unknown[] }).events
          : []
      ) {
        if (!ev || typeof ev !== "object") continue;
        const e: RangeEvent = {};
        for (const k of ["introduced", "fixed", "last_affected", "limit"] as const) {
          const v = str((ev as Record<string, unknown>)[k]);
          if (v) e[k] = v;
        }
        if (Object.keys(e).length === 1) events.push(e);
      }
      if (events.length) ranges.push(events);
    }
    const versions = (Array.isArray((a as { versions?: unknown }).versions)
      ? (a as { versions: unknown[] }).versions
      : [])
      .map((v) =>
        str(v)
      )
      .filter((v): v is string => v !== null)
      .slice(0, MAX_VERSIONS);
    if (!ranges.length && !versions.length) continue;
    out.push({
      id,
      aliases,
      ecosystem,
      package: name,
      severity: severityOf(r, a as Record<string, unknown>),
      summary,
      references,
      ranges,
      versions,
      modified,
    });
  }
  return out;
}

/** Is `version` affected, with `compare` the ecosystem's version order? Also the fix, if any. */
export function affects(
  a: Pick<Affected, "ranges" | "versions">,
  version: string,
  compare: (x: string, y: string) => number,
): { affected: boolean; fixed: string | null } {
  let fixed: string | null = null;
  let affected = a.versions.includes(version);
  for (const events of a.ranges) {
    // OSV evaluation: sort events by version ("0" lowest), then walk; the version is affected
    // when the last event at or below it is an `introduced`.
    const sorted = events
      .map((e) => {
        const [kind, v] = Object.entries(e)[0] as [keyof RangeEvent, string];
        return { kind, v };
      })
      .sort((x, y) => (x.v === "0" ? (y.v === "0" ? 0 : -1) : y.v === "0" ? 1 : compare(x.v, y.v)));
    let state = false;
    for (const e of sorted) {
      const c = e.v === "0" ? 1 : compare(version, e.v);
      if (e.kind === "introduced") {
        if (c >= 0) state = true;
      } else if (e.kind === "fixed" || e.kind === "limit") {
        if (c >= 0) state = false;
      } else if (e.kind === "last_affected") {
        if (c > 0) state = false;
      }
    }
    if (state) {
      affected = true;
      for (const e of sorted) {
        if (e.kind === "fixed" && compare(e.v, version) > 0) {
          fixed = e.v;
          break;
        }
      }
    }
  }
  return { affected, fixed };
}
