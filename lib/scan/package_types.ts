// What the package-database parsers (package_dbs.ts, rpmdb.ts, language_pkgs.ts) take and give,
// in a file of its own so the parsers share it without importing one another in a circle.
export interface Package {
  name: string;
  version: string;
  source_name?: string;
  source_version?: string;
  arch?: string;
  type: "deb" | "apk" | "rpm" | "npm" | "pypi";
  /** the database file it came from */
  location: string;
}

export interface ParseResult {
  packages: Package[];
  warnings: string[];
}

/**
 * Budgets of the package-database parsers. Every parser reads bytes incrementally and keeps only
 * the few fields it reports, so memory is bounded by the package count, not the file size.
 */
export interface DbLimits {
  /** packages listed over all databases of an image; the rest is reported as a warning */
  maxPackages?: number;
  /** bytes of one reported field (Package, Version, Source…); an entry with a longer one is skipped */
  maxFieldBytes?: number;
  /** bytes of one rpm header blob; a larger one is skipped */
  maxRpmHeaderBytes?: number;
  /**
   * bytes of rpm header values read from one database, over all its packages (a hostile
   * database can point many entries at the same data); default: RPM_READ_FACTOR × the file size
   */
  maxRpmReadBytes?: number;
  /** bytes read from the head of an os-release or distro release file */
  maxReleaseFileBytes?: number;
  /** characters kept of each os-release field */
  maxOsFieldChars?: number;
}

/** Options of one parser: DbLimits plus, from inventory(), the image-wide limit to name. */
export interface ParseOptions extends DbLimits {
  /** @internal the image's package limit, named in the warning when maxPackages is what is left */
  packageLimit?: number;
}

/** A parse result that may have stopped at the package limit. */
export interface LimitedResult extends ParseResult {
  truncated?: boolean;
}
