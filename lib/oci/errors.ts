// The one error type of the registry. Every failure that reaches a client is a RegistryError;
// routes/errors.ts turns it into the OCI body `{errors:[{code,message,detail}]}`. An answer whose
// status is not its code's default below comes from a named factory in error_factories.ts: a
// throw site never picks a status.

export type ErrorCode =
  | "BLOB_UNKNOWN"
  | "BLOB_UPLOAD_INVALID"
  | "BLOB_UPLOAD_UNKNOWN"
  | "DIGEST_INVALID"
  | "MANIFEST_BLOB_UNKNOWN"
  | "MANIFEST_INVALID"
  | "MANIFEST_UNKNOWN"
  | "NAME_INVALID"
  | "NAME_UNKNOWN"
  | "SIZE_INVALID"
  | "UNAUTHORIZED"
  | "DENIED"
  | "UNSUPPORTED"
  | "REPLICATION_SUPERSEDED"
  | "INTERNAL_ERROR"
  | "PROVIDER_UNAVAILABLE"
  | "RECLAMATION_IN_PROGRESS"
  | "TOOMANYREQUESTS";

const DEFAULT_STATUS: Record<ErrorCode, number> = {
  BLOB_UNKNOWN: 404,
  BLOB_UPLOAD_INVALID: 413,
  BLOB_UPLOAD_UNKNOWN: 404,
  DIGEST_INVALID: 400,
  MANIFEST_BLOB_UNKNOWN: 404,
  MANIFEST_INVALID: 400,
  MANIFEST_UNKNOWN: 404,
  NAME_INVALID: 400,
  NAME_UNKNOWN: 404,
  SIZE_INVALID: 416,
  UNAUTHORIZED: 401,
  DENIED: 403,
  UNSUPPORTED: 400,
  REPLICATION_SUPERSEDED: 409,
  INTERNAL_ERROR: 500,
  PROVIDER_UNAVAILABLE: 503,
  RECLAMATION_IN_PROGRESS: 503,
  TOOMANYREQUESTS: 429,
};

const MESSAGES: Record<ErrorCode, string> = {
  BLOB_UNKNOWN: "blob unknown to registry",
  BLOB_UPLOAD_INVALID: "blob upload invalid",
  BLOB_UPLOAD_UNKNOWN: "blob upload unknown to registry",
  DIGEST_INVALID: "provided digest did not match uploaded content",
  MANIFEST_BLOB_UNKNOWN: "manifest references a blob unknown to the repository",
  MANIFEST_INVALID: "manifest invalid",
  MANIFEST_UNKNOWN: "manifest unknown",
  NAME_INVALID: "invalid repository name",
  NAME_UNKNOWN: "repository name not known to registry",
  SIZE_INVALID: "requested range not satisfiable",
  UNAUTHORIZED: "authentication required",
  DENIED: "requested access to the resource is denied",
  UNSUPPORTED: "the operation is unsupported",
  REPLICATION_SUPERSEDED: "replication write superseded by a newer local write",
  INTERNAL_ERROR: "internal server error",
  PROVIDER_UNAVAILABLE: "provider unavailable",
  RECLAMATION_IN_PROGRESS: "blob reclamation in progress, retry later",
  TOOMANYREQUESTS: "too many requests",
};

export class RegistryError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly detail: string;
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    detail = "",
    opts: { status?: number; message?: string; headers?: Record<string, string> } = {},
  ) {
    super(opts.message ?? MESSAGES[code]);
    this.code = code;
    this.status = opts.status ?? DEFAULT_STATUS[code];
    this.detail = detail;
    this.headers = opts.headers ?? {};
  }

  body(): { errors: { code: string; message: string; detail: string }[] } {
    return { errors: [{ code: this.code, message: this.message, detail: this.detail }] };
  }
}

export const isRegistryError = (e: unknown): e is RegistryError => e instanceof RegistryError;
