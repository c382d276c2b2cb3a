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
