// The filesystem tab's anchor (SPEC §Web UI routes): `#filesystem`, `#filesystem/<path>` for an
// open file, `@L<n>` (1-based) for the version layer n holds. Path segments are percent-encoded
// so a name holding `@`, `#`, `%` or a space survives the round trip.

export interface FsRoute {
  path: string | null;
  layer: number | null;
}

const TAB = "#filesystem";

export function parseFsAnchor(hash: string): FsRoute | null {
  if (!hash.startsWith(TAB)) return null;
  let rest = hash.slice(TAB.length);
  if (rest !== "" && !rest.startsWith("/") && !rest.startsWith("@")) {
    return null;
  }
  let layer: number | null = null;
  const at = /@L([1-9][0-9]{0,5})$/.exec(rest);
  if (at) {
    layer = Number(at[1]);
    rest = rest.slice(0, at.index);
  }
  const raw = rest.replace(/^\/+/, "").replace(/\/+$/, "");
  let path: string | null = null;
  if (raw) {
    try {
      path = raw.split("/").map(decodeURIComponent).join("/");
    } catch {
      path = raw; // a malformed escape: taken as written
    }
  }
  return { path, layer };
}

export function fsAnchor(route: FsRoute): string {
  const p = route.path ? "/" + route.path.split("/").map(encodeURIComponent).join("/") : "";
  return `${TAB}${p}${route.layer ? `@L${route.layer}` : ""}`;
}
