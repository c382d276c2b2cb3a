// The UI config (`GET /v2/_svc/ui/config`), read once at start and shared by the views.
import type { UiConfig } from "./api.ts";

export const uiConfig: UiConfig = { name: "Wharf" };

export function setUiConfig(c: UiConfig) {
  uiConfig.name = c.name;
  uiConfig.oidc = c.oidc;
}
