// The Pull history tab: the newest 100 pulls of the addressed reference (SPEC UI behaviour 5), or
// why none are recorded.
import { getJson, nsPath } from "../api.ts";
import { useLoad } from "../hooks.ts";
import { ErrorState, Loading } from "../states.tsx";

interface Pulls {
  target: string;
  max_pulls: number;
  max_age_secs?: number;
  entries: { client: string; at: string }[];
  next?: number;
}

export function HistoryTab(
  { namespace, reference }: { namespace: string; reference: string },
) {
  const query = reference.includes(":") ? "digest" : "tag";
  const { data, error, reload } = useLoad(
    () =>
      getJson<Pulls>(
        `/v2/${nsPath(namespace)}/_svc/pulls/list?${query}=${encodeURIComponent(reference)}&n=100`,
      ),
    [namespace, reference],
  );
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  if (data.entries.length === 0) {
    return (
      <div data-tab="history">
        <p class="empty" data-no-pulls>
          No pulls of this {query} are recorded: Wharf records pulls only with{" "}
          <code>[global] update_pull_time = true</code> in its config.
        </p>
      </div>
    );
  }
  return (
    <div data-tab="history">
      <p class="muted">
        Newest {data.entries.length} pulls{data.next !== undefined ? " (older ones exist)" : ""}.
      </p>
      <table class="list" data-section="pulls">
        <thead>
          <tr>
            <th scope="col">When</th>
            <th scope="col">Client</th>
          </tr>
        </thead>
        <tbody>
          {data.entries.map((e, i) => (
            <tr key={i}>
              <td>
                <time dateTime={e.at}>{new Date(e.at).toLocaleString()}</time>
              </td>
              <td>{e.client}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
