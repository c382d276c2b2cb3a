// `/_audit`: the audit trail (GET /v2/_svc/audit), newest first, filtered by identity, namespace
// prefix, action and a time window. The filters live in the page's query, so a filtered view is
// a link; "Load more" follows the listing's `next` cursor.
import { useEffect, useState } from "preact/hooks";
import { ApiError, type AuditRecord, getJson } from "./api.ts";
import { AUDIT_PATH, navigate } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

const FILTERS = ["identity", "namespace", "action", "since", "until"] as const;
type Filter = typeof FILTERS[number];
type Filters = Partial<Record<Filter, string>>;

/** Actions the trail records, offered in the action filter (any other name can be typed). */
const ACTIONS = [
  "manifest.push",
  "tag.create",
  "tag.delete",
  "manifest.delete",
  "blob.push",
  "blob.mount",
  "blob.delete",
  "upload.cancel",
  "job.retry",
  "job.delete",
  "prune.run",
  "scrub.run",
  "config.reload",
  "token.issue",
];

const PAGE = 50;

function filtersOf(search: string): Filters {
  const p = new URLSearchParams(search);
  const f: Filters = {};
  for (const k of FILTERS) {
    const v = p.get(k);
    if (v) f[k] = v;
  }
  return f;
}

function query(f: Filters, next?: string): string {
  const p = new URLSearchParams();
  for (const k of FILTERS) if (f[k]) p.set(k, f[k]!);
  p.set("n", String(PAGE));
  if (next) p.set("next", next);
  return `/v2/_svc/audit?${p}`;
}

/** A datetime-local value (the browser's zone) as RFC 3339, and back. */
const toIso = (local: string) => local ? new Date(local).toISOString() : "";
function toLocal(iso: string | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (isNaN(d.getTime())) return "";
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${
    pad(d.getMinutes())
  }`;
}

/** The 404 of a server whose trail is off (routes/audit.ts), not of a bad filter value. */
const isTrailOff = (e: unknown) =>
  e instanceof ApiError && e.status === 404 && /audit trail is not enabled/.test(e.detail);

/** What the page says, first, when the trail is off: that it is, and the key that turns it on. */
function TrailOff() {
  return (
    <div class="notice" role="status" data-audit-off>
      <p>
        The audit trail is off: Wharf records nothing. Set{" "}
        <code>[global.audit] enabled = true</code>{" "}
        in its config file to record who did what from now on (Wharf's{" "}
        <code>docs/operations.md</code>, "Audit trail").
      </p>
    </div>
  );
}

function Records({ filters, onOff }: { filters: Filters; onOff: () => void }) {
  const [records, setRecords] = useState<AuditRecord[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = async (after?: string) => {
    try {
      setError(null);
      const b = await getJson<{ records: AuditRecord[]; next?: string }>(
        query(filters, after),
      );
      setRecords((r) => after ? [...(r ?? []), ...b.records] : b.records);
      setNext(b.next ?? null);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    setRecords(null);
    load();
  }, []);
  useEffect(() => {
    if (isTrailOff(error)) onOff();
  }, [error]);
  if (isTrailOff(error)) return null;
  if (error && !records) return <ErrorState error={error} retry={() => load()} />;
  if (!records) return <Loading />;
  return (
    <>
      {records.length === 0
        ? <p class="empty">No audit records match.</p>
        : (
          <table class="list" data-audit>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Action</th>
                <th scope="col">Outcome</th>
                <th scope="col">Identity</th>
                <th scope="col">Client IP</th>
                <th scope="col">Target</th>
                <th scope="col">Request</th>
              </tr>
            </thead>
            <tbody>
              {records.map((r) => (
                <tr key={r.id} data-record={r.action} data-outcome={r.outcome}>
                  <td>
                    <time dateTime={r.time}>{new Date(r.time).toLocaleString()}</time>
                  </td>
                  <td>{r.action}</td>
                  <td class={r.outcome === "ok" ? "" : "error-text"}>
                    {r.outcome}
                    {r.suppressed ? ` (+${r.suppressed} not stored)` : ""}
                  </td>
                  <td>{r.identity ?? <span class="muted">anonymous</span>}</td>
                  <td>{r.client_ip ?? ""}</td>
                  <td>
                    {r.namespace && <code>{r.namespace}</code>}
                    {r.reference && (
                      <>
                        {" "}
                        <code>{r.reference}</code>
                      </>
                    )}
                    {r.digest && r.digest !== r.reference && (
                      <>
                        {" "}
                        <code title={r.digest}>{r.digest.slice(0, 19)}…</code>
                      </>
                    )}
                    {r.detail && <div class="muted">{r.detail}</div>}
                  </td>
                  <td>
                    <code>{r.request_id ?? ""}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      {error ? <ErrorState error={error} /> : null}
      {next && <button type="button" onClick={() => load(next)}>Load more</button>}
    </>
  );
}

export function Audit() {
  const current = filtersOf(location.search);
  const [form, setForm] = useState<Filters>(current);
  const [off, setOff] = useState(false);
  const set = (k: Filter) => (e: Event) =>
    setForm((f) => ({ ...f, [k]: (e.target as HTMLInputElement).value }));
  const submit = (e: Event) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const k of FILTERS) {
      const v = form[k]?.trim();
      if (v) p.set(k, v);
    }
    const qs = p.toString();
    navigate(qs ? `${AUDIT_PATH}?${qs}` : AUDIT_PATH);
  };
  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit trail</h1>
      {off && <TrailOff />}
      <form
        class="tools"
        onSubmit={submit}
        role="search"
        aria-label="Audit filters"
        hidden={off}
      >
        <label>
          Identity{" "}
          <input
            type="text"
            name="identity"
            value={form.identity ?? ""}
            onInput={set("identity")}
          />
        </label>
        <label>
          Namespace prefix{" "}
          <input
            type="text"
            name="namespace"
            value={form.namespace ?? ""}
            placeholder="team/"
            onInput={set("namespace")}
          />
        </label>
        <label>
          Action{" "}
          <input
            type="text"
            name="action"
            list="audit-actions"
            value={form.action ?? ""}
            onInput={set("action")}
          />
          <datalist id="audit-actions">
            {ACTIONS.map((a) => <option key={a} value={a} />)}
          </datalist>
        </label>
        <label>
          Since{" "}
          <input
            type="datetime-local"
            name="since"
            value={toLocal(form.since)}
            onInput={(e) =>
              setForm((f) => ({ ...f, since: toIso((e.target as HTMLInputElement).value) }))}
          />
        </label>
        <label>
          Until{" "}
          <input
            type="datetime-local"
            name="until"
            value={toLocal(form.until)}
            onInput={(e) =>
              setForm((f) => ({ ...f, until: toIso((e.target as HTMLInputElement).value) }))}
          />
        </label>
        <button type="submit">Filter</button>
      </form>
      <Records key={location.search} filters={current} onOff={() => setOff(true)} />
    </section>
  );
}
