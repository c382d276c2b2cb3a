// The explorer's lists beside the tree: Secrets (files any layer holds with credentials, by kind
// and line), Permissions (setuid/setgid, file capabilities, world-writable) and Waste (bytes of
// files a later layer overwrote or removed, which the image still ships). Each path opens the
// file in the tree.
import { SecretKind } from "../secret_kind.tsx";
import { fsAnchor, type FsRoute } from "./anchor.ts";
import {
  type Finding,
  formatSize,
  type MergedTree,
  modeString,
  permissionFindings,
  permissionFlags,
  secretFiles,
  type Version,
  wasted,
} from "./model.ts";

const MAX_ROWS = 1000;

function status(v: Version): string {
  if (v.hiddenBy < 0 || v.how === "updated") return "present";
  return `${v.how} by L${v.hiddenBy + 1}`;
}

function PathLink(
  p: { path: string; layer: number; open: (r: FsRoute) => void },
) {
  const route = { path: p.path, layer: p.layer + 1 };
  return (
    <a
      href={fsAnchor(route)}
      onClick={(e) => {
        e.preventDefault();
        p.open(route);
      }}
    >
      {p.path}
    </a>
  );
}

function More({ shown, total }: { shown: number; total: number }) {
  return shown < total ? <p class="muted">Showing {shown} of {total}.</p> : null;
}

export function SecretsView(
  { tree, open }: { tree: MergedTree; open: (r: FsRoute) => void },
) {
  const found: Finding[] = secretFiles(tree);
  if (found.length === 0) {
    return <p class="fs-empty">No layer holds a file with a secret in it.</p>;
  }
  const rows = found.flatMap((f) => f.version.entry.content!.secrets!.map((s) => ({ f, s })));
  return (
    <>
      <table class="fs-table fs-list" data-view="secrets">
        <caption>
          {found.length} file{found.length > 1 ? "s" : ""} with secrets
        </caption>
        <thead>
          <tr>
            <th scope="col">Path</th>
            <th scope="col">Layer</th>
            <th scope="col">Kind</th>
            <th scope="col">Line</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {rows.slice(0, MAX_ROWS).map(({ f, s }, i) => (
            <tr
              key={i}
              data-path={f.node.path}
              data-layer={f.version.layer + 1}
            >
              <td>
                <PathLink
                  path={f.node.path}
                  layer={f.version.layer}
                  open={open}
                />
              </td>
              <td>L{f.version.layer + 1}</td>
              <td>
                <SecretKind kind={s.kind} />
              </td>
              <td class="num">{s.line}</td>
              <td>{status(f.version)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <More shown={Math.min(rows.length, MAX_ROWS)} total={rows.length} />
    </>
  );
}

export function PermissionsView(
  { tree, open }: { tree: MergedTree; open: (r: FsRoute) => void },
) {
  const found = permissionFindings(tree);
  if (found.length === 0) {
    return (
      <p class="fs-empty">
        No setuid, setgid, capability or world-writable entries.
      </p>
    );
  }
  return (
    <>
      <table class="fs-table fs-list" data-view="permissions">
        <caption>
          {found.length} entr{found.length > 1 ? "ies" : "y"} with notable permissions
        </caption>
        <thead>
          <tr>
            <th scope="col">Path</th>
            <th scope="col">Layer</th>
            <th scope="col">Mode</th>
            <th scope="col">Flags</th>
            <th scope="col">Capabilities</th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {found.slice(0, MAX_ROWS).map((f, i) => (
            <tr
              key={i}
              data-path={f.node.path}
              data-layer={f.version.layer + 1}
            >
              <td>
                <PathLink
                  path={f.node.path}
                  layer={f.version.layer}
                  open={open}
                />
              </td>
              <td>L{f.version.layer + 1}</td>
              <td>
                <code>{modeString(f.version.entry)}</code>
              </td>
              <td class="fs-flags">
                {permissionFlags(f.version.entry).join(", ")}
              </td>
              <td>{f.version.entry.capabilities?.join(", ") ?? ""}</td>
              <td>{status(f.version)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <More shown={Math.min(found.length, MAX_ROWS)} total={found.length} />
    </>
  );
}

export function WasteView(
  { tree, open }: { tree: MergedTree; open: (r: FsRoute) => void },
) {
  const w = wasted(tree);
  return (
    <>
      <p class="fs-waste-total" data-bytes={w.total}>
        Wasted: <strong>{formatSize(w.total)}</strong> ({w.total} bytes) in {w.rows.length}{" "}
        file version{w.rows.length === 1 ? "" : "s"} overwritten or removed by later layers.
      </p>
      {w.rows.length
        ? (
          <table class="fs-table fs-list" data-view="waste">
            <caption>Wasted bytes per file, largest first</caption>
            <thead>
              <tr>
                <th scope="col">Path</th>
                <th scope="col">Layer</th>
                <th scope="col">Size</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {w.rows.slice(0, MAX_ROWS).map((v, i) => (
                <tr
                  key={i}
                  data-path={w.paths[i]}
                  data-layer={v.layer + 1}
                  data-bytes={v.entry.size}
                >
                  <td>
                    <PathLink path={w.paths[i]} layer={v.layer} open={open} />
                  </td>
                  <td>L{v.layer + 1}</td>
                  <td class="num">{formatSize(v.entry.size)}</td>
                  <td>{status(v)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )
        : null}
      <More shown={Math.min(w.rows.length, MAX_ROWS)} total={w.rows.length} />
    </>
  );
}
