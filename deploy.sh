#!/usr/bin/env bash
# Ships Wharf three ways (docs/deploy.md):
#   deploy.sh binary [--target T]... [--dry-run]     deno compile, one binary per target
#   deploy.sh image [--tag NAME] [--output DEST] [--push REF] [--tls-verify=false] [--dry-run]
#                                                    an OCI image built with buildah from this
#                                                    machine's files (no network, no base image)
#   deploy.sh deno-deploy [--project NAME] [--dry-run]
#                                                    the Deno Deploy entry (deploy/deno_deploy.ts)
set -euo pipefail
cd "$(dirname "$0")"

TARGETS_ALL=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-msvc)
# Every Wharf process runs with deno.json's permission set "wharf" (the tasks, the binary, the
# image's entrypoint, the tests' launcher) and the V8 flags of `deno task start`, read from
# deno.json here rather than restated.
PERMSET=wharf
V8_FLAGS="$(sed -nE 's/.*"start": *"[^"]*(--v8-flags=[^ "]+).*/\1/p' deno.json)"
[ -n "$V8_FLAGS" ] || { echo "deploy.sh: no --v8-flags in deno.json's start task" >&2; exit 2; }
# The sandbox's child modules (and the walk's decoder worker) are loaded by name at run time, which
# deno compile cannot see: they go in with --include.
CHILD_MODULES=(lib/*/*_child.ts lib/index/checkpoint_worker.ts)
DRY=0

run() {
  # Prints each command as a shell-quoted line; runs it unless --dry-run.
  printf '%q ' "$@" | sed 's/ $//'
  echo
  if [ "$DRY" = 0 ]; then "$@"; fi
}

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

ensure_ui() {
  # The web UI is served from ui/dist; a binary or image embeds the built bundle.
  if [ ! -f ui/dist/index.html ]; then run deno task build-ui; fi
}

binary() {
  local targets=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --target) targets+=("${2:?--target needs a value}"); shift 2 ;;
      --target=*) targets+=("${1#--target=}"); shift ;;
      --dry-run) DRY=1; shift ;;
      *) usage ;;
    esac
  done
  [ ${#targets[@]} -gt 0 ] || targets=("${TARGETS_ALL[@]}")
  for t in "${targets[@]}"; do
    case " ${TARGETS_ALL[*]} " in *" $t "*) ;; *) echo "deploy.sh: unknown target $t (one of: ${TARGETS_ALL[*]})" >&2; exit 2 ;; esac
  done
  ensure_ui
  if [ -n "${DENORT_BIN:-}" ]; then
    # deno compile downloads the runtime (denort) for each target unless DENORT_BIN names one.
    echo "# DENORT_BIN=$DENORT_BIN: the runtime is taken from there (it must match the target)"
  fi
  if [ "$DRY" = 0 ]; then mkdir -p dist; fi
  for t in "${targets[@]}"; do
    local out="dist/wharf-$t"
    case "$t" in *windows*) out="$out.exe" ;; esac
    local includes=(--include ui/dist)
    local m
    for m in "${CHILD_MODULES[@]}"; do includes+=(--include "$m"); done
    # --allow-run beside the permission set: a binary's sandbox child is the binary itself, whose
    # path is not known when it is compiled (the set names `deno`, the runtime on PATH).
    run deno compile "-P=$PERMSET" --allow-run "$V8_FLAGS" "${includes[@]}" --target "$t" --output "$out" main.ts
  done
}

image() {
  local tag="localhost/wharf:latest" output="" push="" tlsverify="true"
  while [ $# -gt 0 ]; do
    case "$1" in
      --tag) tag="${2:?}"; shift 2 ;;
      --output) output="${2:?}"; shift 2 ;;
      --push) push="${2:?}"; shift 2 ;;
      --tls-verify=false) tlsverify="false"; shift ;;
      --dry-run) DRY=1; shift ;;
      *) usage ;;
    esac
  done
  ensure_ui
  local deno_bin
  deno_bin="$(command -v deno)"
  local rootfs userfs
  rootfs="$(mktemp -d "${TMPDIR:-/tmp}/wharf-rootfs.XXXXXX")"
  # What the non-root user must own (the /data volume, deno's cache) is copied in with --chown.
  userfs="$(mktemp -d "${TMPDIR:-/tmp}/wharf-userfs.XXXXXX")"
  trap 'rm -rf "$rootfs" "$userfs"' RETURN
  echo "# rootfs $rootfs: deno, its glibc libraries, the sources and their npm packages"
  # The runtime and exactly the shared libraries it links (glibc: deno does not run on musl).
  run install -D -m 0755 "$deno_bin" "$rootfs/usr/local/bin/deno"
  local lib
  for lib in $(ldd "$deno_bin" | grep -oE '/[^ ]+\.so[^ ]*' | sort -u); do
    run install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
  # The sources (tracked files only) and the built UI.
  if [ "$DRY" = 0 ]; then
    mkdir -p "$rootfs/app"
    git ls-files -z -- main.ts deno.json deno.lock commands lib routes deploy | grep -zv '_test\.ts$' |
      xargs -0 -I{} install -D -m 0644 {} "$rootfs/app/{}"
    cp -r ui/dist "$rootfs/app/ui/"
    # npm packages resolved from deno.lock into the image's own cache, so the container starts
    # with --cached-only and no network: copied from this machine's Deno cache where it holds
    # them (an offline machine builds the image), the rest downloaded from the npm registry.
    local npm_from npm_to="$userfs/opt/deno/npm/registry.npmjs.org" rel
    npm_from="$(deno info --json | sed -nE 's/^ *"npmCache": *"(.*)",?$/\1/p')/registry.npmjs.org"
    mkdir -p "$npm_to"
    deno eval --no-config 'for (const k of Object.keys(JSON.parse(Deno.readTextFileSync("deno.lock")).npm ?? {})) { const at = k.indexOf("@", 1), name = k.slice(0, at); console.log(`${name}/${k.slice(at + 1).split("_")[0]}`); }' |
      sort -u | while read -r rel; do
        if [ -e "$npm_from/$rel" ]; then (cd "$npm_from" && cp -a --parents "$rel" "$npm_to/"); fi
      done
    DENO_DIR="$userfs/opt/deno" deno cache --unstable-kv --frozen "$rootfs/app/main.ts" >/dev/null
    mkdir -p "$rootfs/etc/wharf" "$userfs/data" "$rootfs/tmp" "$rootfs/etc/ssl/certs"
    chmod 1777 "$rootfs/tmp"
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/" 2>/dev/null || true
    printf 'root:x:0:0:root:/root:/sbin/nologin\nwharf:x:10001:10001:wharf:/data:/sbin/nologin\n' >"$rootfs/etc/passwd"
    printf 'root:x:0:\nwharf:x:10001:\n' >"$rootfs/etc/group"
    cat >"$rootfs/etc/wharf/wharf.toml" <<'TOML'
# Default config of the image: everything under the /data volume. Mount another file over
# this one (or add -c FILE) for S3, a remote KV, auth.
[server]
bind_address = "0.0.0.0"
port = 5000

[blob_store.fs]
root_dir = "/data/blobs"

[metadata_store]
path = "/data/metadata.kv"
TOML
    cat >"$rootfs/app/healthcheck.js" <<'JS'
// HEALTHCHECK: 0 when GET /healthz answers 200.
const port = Deno.env.get("WHARF_PORT") ?? "5000";
fetch(`http://127.0.0.1:${port}/healthz`).then((r) => Deno.exit(r.ok ? 0 : 1), () => Deno.exit(1));
JS
  fi
  local ctr
  if [ "$DRY" = 0 ]; then ctr="$(buildah from scratch)"; else ctr="CONTAINER"; echo "buildah from scratch"; fi
  run buildah copy "$ctr" "$rootfs" /
  run buildah copy --chown 10001:10001 "$ctr" "$userfs" /
  run buildah config \
    --user 10001:10001 \
    --workingdir /data \
    --volume /data \
    --port 5000/tcp \
    --env DENO_DIR=/opt/deno \
    --env DENO_NO_UPDATE_CHECK=1 \
    --env PATH=/usr/local/bin \
    --entrypoint "[\"/usr/local/bin/deno\",\"run\",\"--cached-only\",\"-P=$PERMSET\",\"--config=/app/deno.json\",\"$V8_FLAGS\",\"/app/main.ts\"]" \
    --cmd '["serve","-c","/etc/wharf/wharf.toml"]' \
    --healthcheck 'CMD /usr/local/bin/deno run --cached-only --allow-net --allow-env /app/healthcheck.js' \
    --healthcheck-interval 30s --healthcheck-timeout 5s --healthcheck-retries 3 \
    --label org.opencontainers.image.title=wharf \
    "$ctr"
  # docker format: the OCI image config has no place for a healthcheck.
  run buildah commit --format docker --rm "$ctr" "$tag"
  if [ -n "$output" ]; then run buildah push "$tag" "$output"; fi
  if [ -n "$push" ]; then run buildah push --tls-verify="$tlsverify" "$tag" "$push"; fi
}

deno_deploy() {
  local project="wharf"
  while [ $# -gt 0 ]; do
    case "$1" in
      --project) project="${2:?}"; shift 2 ;;
      --dry-run) DRY=1; shift ;;
      *) usage ;;
    esac
  done
  ensure_ui
  # deployctl is not installable here (JSR/network); the command is what to run where it is.
  echo "# set WHARF_CONFIG (TOML with [blob_store.s3]) and AWS_* in the project's environment"
  DRY=1 run deployctl deploy --project="$project" --entrypoint=deploy/deno_deploy.ts \
    --include=main.ts,deno.json,deno.lock,commands,lib,routes,deploy,ui/dist --exclude='**/*_test.ts' --prod
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  binary) binary "$@" ;;
  image) image "$@" ;;
  deno-deploy) deno_deploy "$@" ;;
  *) usage ;;
esac
