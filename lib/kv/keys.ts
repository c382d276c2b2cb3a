// Every Deno KV key Wharf writes. The whole layout, as a tree:
//
//   blob/<digest>                         → BlobRecord      bytes exist in the blob store
//   owner/<digest>/<ns>                   → true            reverse of link (mount without from, scrub)
//   link/<ns>/<digest>                    → LinkRecord      the namespace owns (may read) the blob
//   rev/<ns>/<digest>                     → RevisionRecord  a manifest revision
//   tag/<ns>/<tag>                        → TagRecord
//   tagrev/<ns>/<digest>/<tag>            → true            tags pointing at a revision
//   tagver/<ns>                           → true            rewritten by every tag change: its
//                                                           versionstamp validates cached tag lists
//                                                           (set blindly: no write checks it but
//                                                           a release of more held tags than a
//                                                           commit can check one by one)
//   revtagver/<ns>/<digest>               → true            rewritten by every commit that changes
//                                                           which tags name the revision (a tag
//                                                           pointed at it, moved off it, deleted):
//                                                           a delete by digest checks it, so only
//                                                           tag writes of ITS revision conflict
//                                                           with it. Absent = never changed since
//                                                           the revision was written (no migration:
//                                                           a revision stored before this key
//                                                           existed reads as that); deleted with
//                                                           the revision
//   unlinkver/<ns>                        → true            rewritten by every blob delete in ns:
//                                                           checked by strict-mode manifest commits
//   refver/<ns>                           → true            rewritten by every commit adding manifest
//                                                           references (bref) in ns: checked by blob
//                                                           deletes, one key for the whole set
//   bref/<ns>/<blob digest>/<manifest>    → true            a manifest of ns references the blob
//   mref/<ns>/<child digest>/<index>      → Platform|null   an index of ns names the child manifest
//   referrer/<ns>/<subject>/<digest>      → ReferrerRecord  a manifest of ns whose subject is <subject>
//   ns/<ns>                               → { at }          category index (catalog, namespace lists)
//   upload/<ns>/<uuid>                    → UploadRecord
//   body/<digest>/<ns>                    → true            a revision of ns keeps its manifest
//                                                           body in the blob store (scrub keeps it)
//   reclaim/<digest>                      → ReclaimMarker   scrub is deleting the bytes: writers
//                                                           that would reference them answer 503
//   scrublock                             → { at, holder }  one scrub at a time (lease)
//   writeprobe                            → never written   checked absent by a commit that tells
//                                                           whether a KV file can be written
//                                                           (lib/kv/open.ts)
//   quarantine/<digest>                   → QuarantineRecord its stored bytes did not hash to the
//                                                           digest: out of serving (lib/registry/
//                                                           quarantine.ts), unlinked, refetched
//                                                           where a source exists
//   verifycur/<scope>                     → VerifyCursor    where an interrupted verify pass goes
//                                                           on ("" every blob, else a namespace)
//   verifylock                            → VerifyLease     one verify at a time (lease)
//   pull/<ns>/<target>/<at>/<id>          → client          one recorded pull of a tag or digest
//                                                           (blind set per manifest GET: "live")
//   pullc/<ns>/<target>/<newest>/<id>     → PullChunk       live pulls folded by scrub, newest
//                                                           first; trimmed to max_pulls/max_age
//   lastpull/<ns>/<digest>                → KvU64 (ms)      newest pull of a revision (atomic max)
//
//   usage/<repository>                    → KvU64           bytes of the distinct digests the
//                                                           repository's namespaces link or hold
//                                                           revisions of (lib/metadata/usage.ts)
//   qref/<repository>/<digest>            → KvU64           links + revisions of the digest in
//                                                           the repository (it counts once)
//   qwriter/<repository>                  → process id      the last process that committed growth
//                                                           checking the total (blind sums check it)
//
//   ratelimit/<scope>/<class>/<who>       → number (ms)     a token bucket's theoretical arrival
//                                                           time (GCRA), settled by lib/ratelimit
//                                                           in batches; expires once refilled
//
//   upcheck/<ns>/<tag>                    → UpstreamCheck   when a pull-through tag was last checked
//                                                           against its upstream (revalidate_secs)
//
//   job/<queue>/q/<storage key>           → JobRecord       a pending (or leased) job (lib/jobs);
//                                                           the storage key orders it by due time
//   job/<queue>/lock/<lock key>           → { key }         the one unclaimed job of a lock key
//   job/<queue>/f/<storage key>           → JobRecord       a failed (dead-lettered) job
//   progress/<kind>/<run key>             → RunRecord       a long run the UI shows (lib/jobs/
//                                                           progress.ts): a reindex or rescan
//                                                           batch of jobs, a sync run; the run key
//                                                           is storageKey(start, id); the newest
//                                                           20 of each kind are kept
//   progress/<kind>/<run key>/<count>     → KvU64           a batch's jobs "done" or "failed",
//                                                           summed in each job's settling commit
//
//   evq/<webhook>/<storage key>           → OutboxEntry     an event waiting for an async webhook
//   evlease/<webhook>                     → { holder, until } one deliverer per webhook (lib/events)
//
//   layeridx/<digest>                     → IndexRecord     a layer's listing (lib/index)
//   fidxdone/<layer>                      → { version, files } the layer's file index is written
//   fsha/<sha256>/<layer>/<path|hash>     → { size, kind }  the file index (lib/index/file_search.ts),
//   fpath/<path|hash>/<layer>             → …               by content digest, path, basename and
//   fname/<name|hash>/<layer>/<path|hash> → …               basename reversed; a part too long for
//   fnamer/<reversed>/<layer>/<path|hash> → …               a key is its sha256 as bytes
//
//   scanrep/<manifest digest>             → ScanRecord      where an image's scan report is (lib/scan)
//   osvmeta                               → AdvisoryMeta    the current advisory snapshot
//   osv/<snapshot>/<ecosystem>/<package>/<id> → Affected    one advisory's ranges for one package
//
//   repl/<downstream>/caps                → DownstreamCaps  what the downstream was seen to support
//                                                           (tag delete, digest delete), per URL
//   repl/<downstream>/count/<outcome>     → KvU64           replication job runs by outcome (sum)
//   repl/<downstream>/ok                  → ms              last successful job run
//   repl/<downstream>/error               → DownstreamError last failed or unsupported job run
//
//   sync/<repository>/lease               → SyncLease       one scheduled pull sync run of the
//                                                           repository at a time, across processes
//   sync/<repository>/run/<n>             → SyncRunRecord   the run of its n-th sync in progress
//                                                           (cursor: a crashed run resumes there)
//   sync/<repository>/last/<n>            → SyncRunRecord   its last finished run
//
//   audit/<time key>                      → AuditRecord     one audited act (lib/audit); the key
//                                                           is storageKey(ms, uuid): time order
//
//   sigv/<ns>/<digest>                    → SignatureVerdict a revision's signature verdict in a
//                                                           repository with [verify] (issue 34),
//                                                           read with the revision on every pull;
//                                                           its hold (enforce) rides in it
//   sigver/<ns>/<subject>                 → true            rewritten by every commit adding a
//                                                           signature of <subject>: a push that
//                                                           judged <subject> checks it
//   heldtag/<ns>/<tag>                    → HeldTag         a tag waiting for its held image's
//                                                           signature (written by the release)
//   holdexp/<until>/<ns>/<digest>         → true            when a hold runs out (time order)
//
// No commit may carry more than KV_LIMITS (kv_limits.ts): 10 checks, 1,000 mutations, 80 KiB of
// keys, 800 KiB in all. Sets a client can grow (tags of a revision, references of a manifest)
// are guarded by one version key (revtagver, refver, unlinkver), never by a check per member; a
// write naming many tags checks them one by one across as many commits as the checks need.
//
// Namespaces and tags are validated (≤ 255 / ≤ 128 chars) before they reach a key, so no key
// nears KV's 2 KiB limit.
//
// The records' types live with their owners: the registry's below lib/metadata, which stores
// them, in keys_blobs.ts, keys_manifests.ts, keys_signatures.ts and keys_quarantine.ts; a folder
// above that keeps records of its own holds their types (lib/jobs/record.ts and progress.ts,
// lib/events/outbox.ts, lib/audit/record.ts, lib/index/layer_store.ts, lib/scan/scan_records.ts
// and advisory_store.ts, lib/replication/state.ts, lib/sync/state.ts).

export const K = {
  blob: (digest: string) => ["blob", digest],
  owner: (digest: string, ns: string) => ["owner", digest, ns],
  owners: (digest: string) => ["owner", digest],
  link: (ns: string, digest: string) => ["link", ns, digest],
  rev: (ns: string, digest: string) => ["rev", ns, digest],
  revs: (ns: string) => ["rev", ns],
  tag: (ns: string, tag: string) => ["tag", ns, tag],
  tags: (ns: string) => ["tag", ns],
  tagver: (ns: string) => ["tagver", ns],
  revTagVersion: (ns: string, digest: string) => ["revtagver", ns, digest],
  unlinkver: (ns: string) => ["unlinkver", ns],
  refver: (ns: string) => ["refver", ns],
  tagrev: (ns: string, digest: string, tag: string) => ["tagrev", ns, digest, tag],
  tagrevs: (ns: string, digest: string) => ["tagrev", ns, digest],
  tagrevsIn: (ns: string) => ["tagrev", ns],
  bref: (ns: string, blob: string, manifest: string) => ["bref", ns, blob, manifest],
  brefs: (ns: string, blob: string) => ["bref", ns, blob],
  mref: (ns: string, child: string, index: string) => ["mref", ns, child, index],
  mrefs: (ns: string, child: string) => ["mref", ns, child],
  mrefsIn: (ns: string) => ["mref", ns],
  referrer: (ns: string, subject: string, digest: string) => ["referrer", ns, subject, digest],
  referrers: (ns: string, subject: string) => ["referrer", ns, subject],
  referrersIn: (ns: string) => ["referrer", ns],
  ns: (ns: string) => ["ns", ns],
  nsAll: () => ["ns"],
  upload: (ns: string, uuid: string) => ["upload", ns, uuid],
  uploadsOf: (ns: string) => ["upload", ns],
  uploadsAll: () => ["upload"],
  body: (digest: string, ns: string) => ["body", digest, ns],
  bodies: (digest: string) => ["body", digest],
  reclaim: (digest: string) => ["reclaim", digest],
  reclaimAll: () => ["reclaim"],
  scrubLock: () => ["scrublock"],
  writeProbe: () => ["writeprobe"],
  quarantine: (digest: string) => ["quarantine", digest],
  quarantineAll: () => ["quarantine"],
  verifyCursor: (scope: string) => ["verifycur", scope],
  verifyLock: () => ["verifylock"],
  linksAll: () => ["link"],
  ownersAll: () => ["owner"],
  revsAll: () => ["rev"],
  bodiesAll: () => ["body"],
  blobsAll: () => ["blob"],
  pull: (ns: string, target: string, at: number, id: string) => ["pull", ns, target, at, id],
  pullsOf: (ns: string, target: string) => ["pull", ns, target],
  pullsAll: () => ["pull"],
  pullChunk: (ns: string, target: string, newest: number, id: string) => [
    "pullc",
    ns,
    target,
    newest,
    id,
  ],
  pullChunksOf: (ns: string, target: string) => ["pullc", ns, target],
  pullChunksAll: () => ["pullc"],
  lastPull: (ns: string, digest: string) => ["lastpull", ns, digest],
  lastPullsIn: (ns: string) => ["lastpull", ns],
  lastPullsAll: () => ["lastpull"],
  upcheck: (ns: string, tag: string) => ["upcheck", ns, tag],
  rateLimit: (scope: string, cls: string, who: string) => ["ratelimit", scope, cls, who],
  usage: (repository: string) => ["usage", repository],
  usageAll: () => ["usage"],
  qref: (repository: string, digest: string) => ["qref", repository, digest],
  qrefsOf: (repository: string) => ["qref", repository],
  qwriter: (repository: string) => ["qwriter", repository],
  replCaps: (downstream: string) => ["repl", downstream, "caps"],
  replCount: (downstream: string, outcome: string) => ["repl", downstream, "count", outcome],
  replCounts: (downstream: string) => ["repl", downstream, "count"],
  replOk: (downstream: string) => ["repl", downstream, "ok"],
  replError: (downstream: string) => ["repl", downstream, "error"],
  syncLease: (repository: string) => ["sync", repository, "lease"],
  syncRun: (repository: string, n: number) => ["sync", repository, "run", n],
  syncLast: (repository: string, n: number) => ["sync", repository, "last", n],
  audit: (timeKey: string) => ["audit", timeKey],
  sigVerdict: (ns: string, digest: string) => ["sigv", ns, digest],
  sigVerdictsIn: (ns: string) => ["sigv", ns],
  sigVerdictsAll: () => ["sigv"],
  sigVersion: (ns: string, subject: string) => ["sigver", ns, subject],
  heldTag: (ns: string, tag: string) => ["heldtag", ns, tag],
  holdExpiry: (until: number, ns: string, digest: string) => ["holdexp", until, ns, digest],
  holdExpiries: () => ["holdexp"],
  auditAll: () => ["audit"],
  jobPending: (queue: string, sk: string) => ["job", queue, "q", sk],
  jobsPending: (queue: string) => ["job", queue, "q"],
  jobFailed: (queue: string, sk: string) => ["job", queue, "f", sk],
  jobsFailed: (queue: string) => ["job", queue, "f"],
  jobLock: (queue: string, lockKey: string) => ["job", queue, "lock", lockKey],
  progress: (kind: string, runKey: string) => ["progress", kind, runKey],
  progressCount: (kind: string, runKey: string, count: "done" | "failed") => [
    "progress",
    kind,
    runKey,
    count,
  ],
  progressOf: (kind: string) => ["progress", kind],
  outbox: (webhook: string, sk: string) => ["evq", webhook, sk],
  outboxOf: (webhook: string) => ["evq", webhook],
  outboxLease: (webhook: string) => ["evlease", webhook],
  layerIndex: (digest: string) => ["layeridx", digest],
  layerIndexAll: () => ["layeridx"],
  fileIndexDone: (layer: string) => ["fidxdone", layer],
  /** a file index key or prefix: the family's first part, then what leads to the file */
  fileIndex: (family: FileIndexFamily, ...rest: Deno.KvKeyPart[]) => [
    FILE_INDEX_PREFIX[family],
    ...rest,
  ],
  scanReport: (digest: string) => ["scanrep", digest],
  scanReportsAll: () => ["scanrep"],
  advisoryMeta: () => ["osvmeta"],
  advisorySnapshot: (snapshot: string) => ["osv", snapshot],
  advisoriesOf: (snapshot: string, ecosystem: string, pkg: string) => [
    "osv",
    snapshot,
    ecosystem,
    pkg,
  ],
} as const satisfies Record<string, (...args: never[]) => Deno.KvKey>;

/** The file index's key families, by what leads a search to a file. */
export const FILE_INDEX_PREFIX = {
  sha256: "fsha",
  path: "fpath",
  name: "fname",
  /** basenames reversed by code point: a pattern's literal end becomes a key prefix */
  reversedName: "fnamer",
} as const;
export type FileIndexFamily = keyof typeof FILE_INDEX_PREFIX;

/**
 * The first part of every key above. A key starting with anything else was built outside this
 * file: the strict KV wrapper tests run under refuses it (key_guard.ts).
 */
export const KEY_PREFIXES: ReadonlySet<string> = new Set([
  "blob",
  "owner",
  "link",
  "rev",
  "tag",
  "tagver",
  "revtagver",
  "unlinkver",
  "refver",
  "tagrev",
  "bref",
  "mref",
  "referrer",
  "ns",
  "upload",
  "body",
  "reclaim",
  "scrublock",
  "writeprobe",
  "quarantine",
  "verifycur",
  "verifylock",
  "pull",
  "pullc",
  "lastpull",
  "upcheck",
  "ratelimit",
  "usage",
  "qref",
  "qwriter",
  "repl",
  "sync",
  "audit",
  "sigv",
  "sigver",
  "heldtag",
  "holdexp",
  "job",
  "progress",
  "evq",
  "evlease",
  "layeridx",
  "fidxdone",
  ...Object.values(FILE_INDEX_PREFIX),
  "scanrep",
  "osvmeta",
  "osv",
]);
