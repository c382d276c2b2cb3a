// Placeholder until the filesystem explorer lands (branch ui-fs); same contract.
export interface FsRoute {
  path: string | null;
  layer: number | null;
}
export function parseFsAnchor(hash: string): FsRoute | null {
  if (!hash.startsWith("#filesystem")) return null;
  return { path: null, layer: null };
}
export function fsAnchor(_route: FsRoute): string {
  return "#filesystem";
}
export function FilesystemTab(
  _props: {
    namespace: string;
    layers: { digest: string; size: number; mediaType: string }[];
    route: FsRoute;
    navigate: (route: FsRoute) => void;
  },
) {
  return <section data-tab="filesystem">…</section>;
}
