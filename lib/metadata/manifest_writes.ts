// Manifest push and delete as KV commits that fit the strictest KV backend whatever the manifest
// or request holds (KV_LIMITS: 10 checks, 1,000 mutations, 80 KiB of keys per commit).
//
// Each write checks only the keys whose change would make it wrong, so writes that merely share
// a namespace never conflict (a CI fleet retagging `latest` all day beside deletes and pushes):
// - a tag write checks each tag key it read: its guard judged that value, and it drops the
//   tagrev of the revision the tag leaves. A push naming more tags than its head commit has
//   checks left writes the others in further commits, each checking its tags and the revision;
// - a delete by digest checks the revision and its revtagver/<ns>/<digest>, which every commit
//   changing which tags name that revision rewrites (a tag pointed at it, moved off it,
//   deleted), so only tag writes of that revision conflict with it;
// - sets a client can grow are guarded by one version key: every commit adding references
//   rewrites refver/<ns>, every blob delete rewrites unlinkver/<ns> (blobs.ts).
// tagver/<ns> is still rewritten by every tag change, blindly (no check: a blind set conflicts
// with nothing), for listTags' cache. Where a conflict is real, the loser retries until it wins
// (commitWithRetry: for up to COMMIT_RETRY_MS, then 503 saying the KV is overloaded).
//
// What does not fit one commit is split in a safe order:
// - references (bref/mref) go first: a reference without its revision only makes blob deletes
//   refuse and scrub keep bytes, never the reverse, and a retried push completes it;
// - tags beyond the head commit follow it, each batch checking that the revision is still the
//   one the head wrote (a concurrent delete stops the push instead of leaving dangling tags);
// - a delete drops tags first (a revision with fewer tags is a state clients can see anyway),
//   then the revision, then the references derived from its body.
//
// The writes, one file each: manifest_push.ts (the head and tail commits of a push),
// manifest_deletes.ts (a tag's delete; a revision's, with the checks each of its commits makes)
// and manifest_mutations.ts (what they are made of: ManifestWrite, a tag's and a body's
// mutations, the tag writes of one commit).
export {
  type Alongside,
  type ManifestWrite,
  type TagGuard,
  tagMutations,
} from "./manifest_mutations.ts";
export { commitManifest } from "./manifest_push.ts";
export { deleteRevision, deleteTag, type RevisionDelete } from "./manifest_deletes.ts";
