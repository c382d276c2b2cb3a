// `main.ts --help` and `main.ts COMMAND --help`: what each command does and takes (a leaf: main.ts
// and commands/cli.ts are its only readers).

const CONFIG = `  -c, --config FILE   a TOML config file; may repeat, later files win key by key
                      (without one: port 5000, ./data, every request allowed, web UI on)
  -h, --help          this help`;

// The long commands' output options (commands/progress.ts).
const PROGRESS = `  -q, --quiet         print nothing but the summary line and errors
  --json              print JSON lines instead: progress events, then a summary object

Progress: on a terminal one line is rewritten in place (done/total, bytes, rate, time left);
otherwise a plain line every 10 s (WHARF_PROGRESS_INTERVAL_SECS sets the interval). It ends
with a summary line.`;

export const COMMAND_HELP: Record<string, { summary: string; usage: string; body: string }> = {
  serve: {
    summary: "serve the registry, the /v2/_svc API and the web UI (the default command)",
    usage: "main.ts [serve] [--port N] [--bind ADDR] [-c FILE]...",
    body: `  --port N            listen on port N (0: any free one); else WHARF_PORT, else [server]
                      port, else 5000
  --bind ADDR         listen on this address (127.0.0.1: this machine only); else WHARF_BIND,
                      else [server] bind_address, else 0.0.0.0

Drains every job queue in this process. Ctrl+C or SIGTERM finishes open requests and running
jobs, then prints "wharf stopped". A port already in use stops it with one line and exit status
1. (deno task start --port 8080)`,
  },
  worker: {
    summary: "drain job queues in a separate process, without HTTP",
    usage: "main.ts worker [--queue Q]... [-c FILE]...",
    body: `  --queue Q           drain only this queue (cache, replication, scan, index, events);
                      may repeat (default: all of them)

Several workers (and servers) share the work through one KV. Ctrl+C or SIGTERM lets running jobs
finish, then prints "wharf worker stopped". (deno task worker)`,
  },
  replicate: {
    summary: "one reconcile pass over every downstream (queues the pushes and deletes)",
    usage: "main.ts replicate [--dry-run] [-c FILE]...",
    body: `  --dry-run           print what would be queued, queue nothing`,
  },
  sync: {
    summary: 'run each [[repository."<name>".sync]] entry of a pull-through repository once',
    usage: "main.ts sync [--repository R] [--dry-run] [--quiet|--json] [-c FILE]...",
    body: `  --repository R      only this repository's sync entries
  --dry-run           print what would be copied, copy nothing
${PROGRESS}

Runs under the repository's lease: a scheduled run elsewhere makes it exit 1. A server's
Replication page shows a run in progress.`,
  },
  reindex: {
    summary: "queue the layers without a current layer index",
    usage: "main.ts reindex [--namespace N] [--dry-run] [--force] [--quiet|--json] [-c FILE]...",
    body: `  --namespace N       only the layers of this namespace's images (image name)
  --dry-run           print what would be queued, queue nothing
  --force             queue every layer, indexed or not
${PROGRESS}

The server's index jobs do the work; its Jobs page (index) shows them done of those queued.`,
  },
  scan: {
    summary: "queue image scans, or print the loaded advisory snapshot",
    usage:
      "main.ts scan [--namespace N] [--rescan] [--dry-run] [--status] [--quiet|--json] [-c FILE]...",
    body: `  --namespace N       only the images of this namespace (image name)
  --rescan            every image, not only those without a report of the current advisories
  --dry-run           print what would be queued, queue nothing
  --status            print the advisory snapshot instead (as "advisories status")
${PROGRESS}

The server's scan jobs do the work; its Jobs page (scan) shows them done of those queued.`,
  },
  advisories: {
    summary: "download OSV advisories once, or say what is loaded and from when",
    usage:
      "main.ts advisories fetch [--dir D] [--ecosystem E]... [--quiet|--json] [-c FILE]...\n       main.ts advisories status [--dir D] [-c FILE]...",
    body:
      `  fetch               download <Ecosystem>/all.zip from [scan] advisories_url (osv.dev's bucket
                      by default) into D, conditionally, resuming a cut download, verified
                      before it replaces a good file; exit status 1 when any failed
  status              the loaded snapshot, each file in D (fetched, checked, last error) and
                      the download schedule
  --dir D             the directory (default [scan] advisories_dir)
  --ecosystem E       fetch this ecosystem (Debian, Alpine, Ubuntu, "Rocky Linux", npm, PyPI...);
                      may repeat (default: those of the images Wharf holds, plus
                      [scan] advisories_ecosystems)
${PROGRESS}

Offline sites: run "advisories fetch --dir osv --ecosystem Debian ..." on a connected machine,
carry osv/ across into advisories_dir; Wharf loads what changed within reload_interval_secs.`,
  },
  scrub: {
    summary: "reclaim unreferenced blobs, stale uploads and what was derived from them",
    usage: "main.ts scrub [--dry-run] [--quiet|--json] [-c FILE]...",
    body: `  --dry-run           print what would be reclaimed, delete nothing
${PROGRESS}

Safe while servers run (one scrub at a time holds a lease). (deno task scrub)`,
  },
  verify: {
    summary: "re-hash stored blobs against their digests; quarantine those that do not match",
    usage: "main.ts verify [--dry-run] [--namespace N] [--rate BYTES_PER_SEC] [-c FILE]...",
    body: `  --dry-run           print what does not match, quarantine nothing
  --namespace N       only the blobs and manifests of this namespace (image name)
  --rate N            hash at most N bytes per second (default [global.integrity] bytes_per_sec,
                      16 MiB/s); 0: as fast as the store reads

A blob whose bytes do not hash to its digest is quarantined: no longer served (BLOB_UNKNOWN
saying why), unlinked from its namespaces, and fetched again from the upstream of a
pull-through namespace; a pushed one stays quarantined until it is pushed again. Then the
manifest bodies kept in KV. Safe while servers run (one verify at a time holds a lease).
Ctrl+C or SIGTERM stops it between two reads; the next run goes on where it stopped.
Exit status: 0 nothing wrong, 1 another verify runs or the pass failed (a store down; the
next run goes on), 3 corrupt or missing bytes found, 130 stopped. (deno task wharf verify)`,
  },
  prune: {
    summary: "apply the retention policies once",
    usage: "main.ts prune [--dry-run] [--now T] [--quiet|--json] [-c FILE]...",
    body: `  --dry-run           print what would be deleted, delete nothing
  --now T             the time rules see (RFC 3339), e.g. to preview a later run
${PROGRESS}`,
  },
  "hash-password": {
    summary: "print an argon2id hash of the password on standard input, for [auth] users",
    usage: "main.ts hash-password",
    body: `Reads the first line of standard input, so the password never shows in argv or shell
history. (deno task hash-password)`,
  },
};

/** `main.ts --help`, or one command's when `command` names one. */
export function helpText(command: string | null): string {
  const c = command ? COMMAND_HELP[command] : undefined;
  if (c) {
    const summary = c.summary[0].toUpperCase() + c.summary.slice(1);
    return `Usage: ${c.usage}\n\n${summary}.\n\n${c.body}\n\n${CONFIG}\n`;
  }
  const width = Math.max(...Object.keys(COMMAND_HELP).map((k) => k.length)) + 2;
  const commands = Object.entries(COMMAND_HELP).map(([k, v]) => `  ${k.padEnd(width)}${v.summary}`)
    .join("\n");
  return `Wharf, a container image registry.

Usage: main.ts [COMMAND] [OPTIONS]

Commands:
${commands}

Options of every command:
${CONFIG}

"main.ts COMMAND --help" describes one command.
`;
}

export const COMMANDS = Object.keys(COMMAND_HELP);
