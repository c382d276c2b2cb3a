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

/** Who runs a repository's sync, until when (ms since epoch); renewed while it runs. */
export interface SyncLease {
  holder: string;
  until: number;
}

/** One run of a `[[repository."<name>".sync]]` entry (lib/sync). Bounded: < 16 KiB. */
export interface SyncRunRecord {
  id: string;
  /** the entry's namespaces when the run started (a reordered config does not resume it) */
  namespaces: string[];
  started_at: number;
  finished_at: number | null;
  /** the last namespace and tag done: a resumed run skips what sorts before it */
  cursor: { namespace: string; tag: string } | null;
  tags_fetched: number;
  tags_unchanged: number;
  tags_pruned: number;
  blobs_fetched: number;
  /** bytes of those blobs (absent in records of older versions) */
  bytes_fetched?: number;
  /** "ok", "partial" (some tags failed), "failed" (nothing changed), "rate-limited" */
  outcome: string;
  errors: string[];
  dry_run: boolean;
  /** when the schedule runs it next (ms since epoch): after interval_secs, or a rate limit */
  next_at: number | null;
}

/** What a downstream answered to deletes (null: not seen yet), learned for its `url`. */
export interface DownstreamCaps {
  url: string;
  tagDelete: boolean | null;
  digestDelete: boolean | null;
  /** ms since epoch of the last change */
  at: number;
}

/** The last replication job run to a downstream that failed or could not be applied. */
export interface DownstreamError {
  at: number;
  outcome: string;
  message: string;
}

/**
 * A digest whose stored bytes failed verification (lib/registry/quarantine.ts). Bounded: the
 * namespaces are capped at QUARANTINE_NAMESPACES_KEPT (< 8 KiB).
 */
export interface QuarantineRecord {
  /** ms since epoch when it was found */
  at: number;
  /**
   * claimed: the reclamation marker is held and the bytes may still be in place; moved: out of
   * serving, its namespaces not yet unlinked; settled: done (a verify finishes the others)
   */
  stage: "claimed" | "moved" | "settled";
  /** blob: namespaces owned it (unlinked); manifest: they hold revisions with this body */
  kind: "blob" | "manifest";
  /** stored size in bytes */
  size: number;
  /** what the stored bytes hash to */
  found: string;
  /** a manifest body kept in KV (no bytes to move: every read refuses it until a re-push) */
  inline?: boolean;
  /** whether the store kept a copy of the bytes aside (listQuarantined) */
  kept: boolean;
  /** the namespaces concerned, at most QUARANTINE_NAMESPACES_KEPT */
  namespaces: string[];
  /** how many more there were */
  more: number;
  /** of those, pull-through namespaces that fetch it again from their upstream */
  refetch: string[];
}

export const QUARANTINE_NAMESPACES_KEPT = 20;

/** Who runs the one verify pass (`host` and `pid` for messages), renewed at `at`. */
export interface VerifyLease {
  holder: string;
  at: number;
  host: string;
  pid: number;
}

/**
 * Where a verify pass goes on after an interruption, and its figures so far; once it finished,
 * when (the schedule's next pass is due from then). < 4 KiB.
 */
export interface VerifyCursor {
  id: string;
  startedAt: number;
  /** blobs: the blob store's objects; manifests: manifest bodies kept in KV; done: finished */
  phase: "blobs" | "manifests" | "done";
  /** ms since epoch when the pass finished (phase done) */
  finishedAt?: number;
  /** the last key done in the phase; null: from its start */
  after: Deno.KvKey | null;
  /** the pass's figures so far (VerifySummary's counters) */
  counts: Record<string, number>;
}

export interface ReclaimMarker {
  /** ms since epoch when scrub claimed the digest; a marker long past this is stale */
  at: number;
}

export interface BlobRecord {
  size: number;
  at: number;
}
export interface LinkRecord {
  size: number;
  at: number;
}
export interface RevisionRecord {
  mediaType: string;
  size: number;
  pushedAt: number;
  subject?: string;
  artifactType?: string;
  /** the manifest body when small enough to live in KV; otherwise it is in the blob store */
  body?: Uint8Array;
}
export interface TagRecord {
  digest: string;
  /** ms since epoch; absent for a tag with no recorded creation time (oldest for LWW) */
  createdAt?: number;
}
export interface ReferrerRecord {
  mediaType: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}
export interface UploadRecord {
  offset: number;
  /** the algorithm the session hashes under */
  algorithm: "sha256" | "sha512";
  /** set by `digest-algorithm`: closing with another algorithm is DIGEST_INVALID */
  pinned: boolean;
  startedAt: number;
  /** last time a chunk was committed (idle sessions are reclaimed by scrub) */
  updatedAt?: number;
}

export interface UpstreamCheck {
  /** ms since epoch */
  at: number;
  /** the digest the upstream named for the tag then */
  digest: string;
}

export interface PullEntry {
  /** the identity's username or id, or `anonymous` */
  client: string;
  /** ms since epoch */
  at: number;
}
export interface PullChunk {
  /** newest first */
  entries: PullEntry[];
}

/** Who pushed a held image: the one identity (besides roles granted get-held) that may pull it. */
export interface PusherRecord {
  provider: string;
  id?: string;
  username?: string;
}

/** One signature as a verdict keeps it (strings cut: a record stays < 64 KiB). */
export interface StoredSigner {
  format: string;
  /** the signature artifact's digest */
  artifact: string;
  signer: string | null;
  valid: boolean;
  reason?: string;
}

/** An image waiting for its signature (enforce), inside its verdict. */
export interface HoldInfo {
  /** ms since epoch */
  since: number;
  /** when the hold runs out (then on_expiry) */
  until: number;
  /** tags the push named, written when the image is released (at most HELD_TAGS_MAX) */
  tags: string[];
  /** the tags' creation time once written */
  tagCreatedAt: number;
  /** the hold ran out and on_expiry = "keep": held until a signature or a delete */
  expired?: boolean;
}

/**
 * A revision's signature verdict (lib/registry/signatures.ts). `state`: verified, unverified,
 * or artifact (a signature, attestation or other referrer: never held itself).
 */
export interface SignatureVerdict {
  state: "verified" | "unverified" | "artifact";
  /** the trust fingerprint it was judged under (a different one is re-checked) */
  fingerprint: string;
  checkedAt: number;
  reason?: string;
  /** at most SIGNERS_KEPT */
  signers: StoredSigner[];
  /** verified through the signature of this index, which names it */
  via?: string;
  /** an index verified through its platforms' own signatures (`platforms`), not its own */
  byPlatforms?: boolean;
  pushedBy?: PusherRecord | null;
  /** enforce: unverified and not served but to its pusher and roles granted get-held */
  held?: HoldInfo;
}

/** A tag a held push named, until the image is released (or replaced by another push). */
export interface HeldTag {
  digest: string;
  at: number;
  pushedBy: PusherRecord | null;
}

/** Tags one push into an enforce repository may name while its image is held. */
export const HELD_TAGS_MAX = 32;

/** Manifest bodies up to this size are stored inline in their KV revision record. */
export const INLINE_MANIFEST_MAX = 48 * 1024;
