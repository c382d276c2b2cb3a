// RFC 8288 `Link` header for the next page of a paginated listing.
export function nextLink(
  path: string,
  params: Record<string, string | number | undefined>,
): string {
  const q = Object.entries(params)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
    .join("&");
  return `<${path}?${q}>; rel="next"`;
}

/** `n` of a listing: absent → fallback; anything but a non-negative integer → null (malformed). */
export function parsePageSize(v: string | null, fallback: number): number | null {
  if (v === null) return fallback;
  if (!/^\d{1,9}$/.test(v)) return null;
  return Number(v);
}
