// Downloads go through apiFetch (so they carry the sign-in token and X-Svc-No-Redirect) and reach
// the user as an object URL.
import { apiFetch, checked } from "./api.ts";

export async function downloadFrom(path: string, filename: string) {
  const r = await checked(await apiFetch(path));
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
