// What a write is about to do, known before it touches anything: a subscriber may refuse it
// (a required webhook) and keeps what it needs to turn the write's facts into mutations.
export type WriteIntent =
  | {
    kind: "manifest-push";
    ns: string;
    digest: string;
    /** the tag or digest the client named */
    reference: string;
    tags: string[];
  }
  /**
   * a held image's verdict changes (issue 34); `tags`: the held tags a release writes (the
   * `image-released` fact says which it did write)
   */
  | { kind: "image-release"; ns: string; digest: string; tags: string[] }
  /** a manifest a pull-through repository fetched from its upstream */
  | { kind: "manifest-fetch"; ns: string; digest: string }
  /** `digest`: the revision the tag named when the delete began (null: it named none) */
  | { kind: "tag-delete"; ns: string; tag: string; digest: string | null; at: number }
  | { kind: "manifest-delete"; ns: string; digest: string; at: number }
  /** `digest`: as the client named it (unchecked); the linked digest comes with the fact */
  | { kind: "blob-push"; ns: string; digest: string | null }
  | { kind: "blob-delete"; ns: string; digest: string }
  | {
    kind: "scan-report";
    ns: string;
    digest: string;
    counts: Record<string, number>;
    /** why the packages were matched against no advisory record; absent: they were */
    notChecked?: string;
  };
