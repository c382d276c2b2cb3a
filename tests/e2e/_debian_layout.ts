// A small Debian-like image as an OCI image layout on disk, for a real client (skopeo) to push:
// one gzipped layer with Debian 12's /etc/os-release and a dpkg status database, the config's
// diff_ids right, the manifest under a tag in index.json. What a report of it must say is
// exported beside it.
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { sha256Hex } from "../helpers/server.ts";
import { jsonBytes, OCI_CONFIG, OCI_LAYER, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { tarOf } from "../helpers/tar.ts";

const OS_RELEASE = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
`;

const stanza = (f: Record<string, string>) =>
  Object.entries(f).map(([k, v]) => `${k}: ${v}`).join("\n") + "\n";

/** The packages dpkg lists as installed, as a report must name them. */
export const DEBIAN_PACKAGES = [
  { name: "base-files", version: "12.4+deb12u5" },
  { name: "bash", version: "5.2.15-2+b2" },
  { name: "libc6", version: "2.36-9+deb12u4" },
  { name: "zlib1g", version: "1:1.2.13.dfsg-1" },
];

const STATUS = [
  stanza({
    Package: "base-files",
    Status: "install ok installed",
    Architecture: "amd64",
    Version: "12.4+deb12u5",
  }),
  stanza({
    Package: "bash",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "bash (5.2.15-2)",
    Version: "5.2.15-2+b2",
  }),
  stanza({
    Package: "libc6",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "glibc",
    Version: "2.36-9+deb12u4",
  }),
  stanza({
    Package: "zlib1g",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "zlib",
    Version: "1:1.2.13.dfsg-1",
  }),
  // removed, its configuration kept: not installed, so not in a report
  stanza({
    Package: "tzdata",
    Status: "deinstall ok config-files",
    Architecture: "all",
    Version: "2024a-0+deb12u1",
  }),
].join("\n");

/** The regular files of the layer, as a listing names them. */
export const DEBIAN_FILES = [
  "etc/debian_version",
  "etc/os-release",
  "usr/bin/hello",
  "usr/share/doc/hello/README",
  "var/lib/dpkg/status",
];

export interface DebianLayout {
  /** the layout's directory: `oci:<dir>:<tag>` */
  dir: string;
  tag: string;
  manifest: string;
  layer: string;
}

async function putBlob(dir: string, bytes: Uint8Array): Promise<string> {
  const hex = await sha256Hex(bytes);
  await Deno.writeFile(join(dir, "blobs", "sha256", hex), bytes);
  return `sha256:${hex}`;
}

/** Writes the layout under `dir` (created) with the image tagged `tag`. */
export async function writeDebianLayout(dir: string, tag: string): Promise<DebianLayout> {
  await Deno.mkdir(join(dir, "blobs", "sha256"), { recursive: true });
  const tar = tarOf([
    { path: "etc/", type: "5" },
    { path: "etc/debian_version", data: "12.5\n" },
    { path: "etc/os-release", data: OS_RELEASE },
    { path: "usr/", type: "5" },
    { path: "usr/bin/", type: "5" },
    { path: "usr/bin/hello", data: "#!/bin/sh\necho hello from wharf\n", mode: 0o755 },
    { path: "usr/share/", type: "5" },
    { path: "usr/share/doc/", type: "5" },
    { path: "usr/share/doc/hello/", type: "5" },
    { path: "usr/share/doc/hello/README", data: "A Debian-like image pushed as shipped.\n" },
    { path: "var/", type: "5" },
    { path: "var/lib/", type: "5" },
    { path: "var/lib/dpkg/", type: "5" },
    { path: "var/lib/dpkg/status", data: STATUS },
  ]);
  const gz = new Uint8Array(gzipSync(tar));
  const layer = await putBlob(dir, gz);
  const config = jsonBytes({
    architecture: "amd64",
    os: "linux",
    config: { Cmd: ["/usr/bin/hello"] },
    rootfs: { type: "layers", diff_ids: [`sha256:${await sha256Hex(tar)}`] },
    history: [{ created_by: "tests/e2e/_debian_layout.ts" }],
  });
  const configDigest = await putBlob(dir, config);
  const manifestBytes = jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: configDigest, size: config.length },
    layers: [{ mediaType: OCI_LAYER, digest: layer, size: gz.length }],
  });
  const manifest = await putBlob(dir, manifestBytes);
  await Deno.writeTextFile(join(dir, "oci-layout"), `{"imageLayoutVersion":"1.0.0"}`);
  await Deno.writeTextFile(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      manifests: [{
        mediaType: OCI_MANIFEST,
        digest: manifest,
        size: manifestBytes.length,
        annotations: { "org.opencontainers.image.ref.name": tag },
      }],
    }),
  );
  return { dir, tag, manifest, layer };
}

/** A listing of the layer names exactly its regular files. */
export function assertDebianListing(listing: { entries: { path: string; kind: string }[] }): void {
  const files = listing.entries.filter((e) => e.kind === "file").map((e) => e.path).sort();
  assert.deepEqual(files, DEBIAN_FILES);
}

/** The image's report: Debian 12, its installed packages, and, with no advisory data, said to
 * be not checked (never "clean"). */
export function assertDebianReport(
  // deno-lint-ignore no-explicit-any
  report: any,
  layout: DebianLayout,
): void {
  const json = JSON.stringify(report).slice(0, 3000);
  assert.equal(report.digest, layout.manifest, json);
  assert.equal(report.os?.id, "debian", json);
  assert.equal(report.os?.version_id, "12", json);
  const packages = (report.packages as { name: string; version: string; type: string }[])
    .map((p) => ({ name: p.name, version: p.version, type: p.type }))
    .sort((a, b) => a.name.localeCompare(b.name));
  assert.deepEqual(packages, DEBIAN_PACKAGES.map((p) => ({ ...p, type: "deb" })));
  assert.equal(report.vulnerabilities_checked, false, json);
  assert.equal(typeof report.not_checked, "string", json);
  assert.ok(report.not_checked.length > 0, json);
  assert.deepEqual(report.findings, []);
  assert.deepEqual(report.warnings, [], `a partial report: ${json}`);
}
