// Where the system's zlib and libzstd are. By default the loader finds them by soname; a
// sandboxed walk may use FFI on exactly these files and nothing else (Deno checks an
// `--allow-ffi=<path>` grant against the path given to dlopen), so it is told their absolute
// paths, and passes them on to its decoder worker.
export type NativeLibrary = "zlib" | "zstd";

const SONAMES: Record<NativeLibrary, string> = { zlib: "libz.so.1", zstd: "libzstd.so.1" };
const paths: Record<NativeLibrary, string> = { ...SONAMES };

export function libraryPath(lib: NativeLibrary): string {
  return paths[lib];
}

export function libraryPaths(): Record<NativeLibrary, string> {
  return { ...paths };
}

export function setLibraryPaths(p: Partial<Record<NativeLibrary, string>>): void {
  for (const k of Object.keys(SONAMES) as NativeLibrary[]) if (p[k]) paths[k] = p[k]!;
}

/** Whether FFI is granted for `lib` (by path or wholly). */
export function ffiGranted(lib: NativeLibrary): boolean {
  const path = paths[lib];
  const q = path.startsWith("/")
    ? Deno.permissions.querySync?.({ name: "ffi", path })
    : Deno.permissions.querySync?.({ name: "ffi" });
  return q?.state === "granted";
}

const DIRS = [
  "/usr/lib/x86_64-linux-gnu",
  "/lib/x86_64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
  "/lib/aarch64-linux-gnu",
  "/usr/lib64",
  "/lib64",
  "/usr/lib",
  "/lib",
  "/usr/local/lib",
];

/** The absolute paths of the libraries on this machine (those found). */
export function findLibraryPaths(): Partial<Record<NativeLibrary, string>> {
  const out: Partial<Record<NativeLibrary, string>> = {};
  for (const [lib, so] of Object.entries(SONAMES) as [NativeLibrary, string][]) {
    if (paths[lib].startsWith("/")) {
      out[lib] = paths[lib];
      continue;
    }
    for (const d of DIRS) {
      try {
        if (Deno.statSync(`${d}/${so}`).isFile) {
          out[lib] = Deno.realPathSync(`${d}/${so}`);
          break;
        }
      } catch { /* not here */ }
    }
  }
  return out;
}
