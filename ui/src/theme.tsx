// Light, dark or the system's theme (SPEC UI behaviour 13), saved in local storage and applied as
// `data-theme` on <html>, which the stylesheet's colour variables follow.
import { useState } from "preact/hooks";

export type Theme = "light" | "dark" | "system";
const KEY = "wharf.theme";

export function savedTheme(): Theme {
  try {
    const t = localStorage.getItem(KEY);
    return t === "light" || t === "dark" ? t : "system";
  } catch {
    return "system";
  }
}

export function applyTheme(theme: Theme) {
  if (theme === "system") {
    document.documentElement.removeAttribute("data-theme");
  } else document.documentElement.setAttribute("data-theme", theme);
}

export function ThemePicker() {
  const [theme, setTheme] = useState<Theme>(savedTheme);
  const pick = (t: Theme) => {
    setTheme(t);
    applyTheme(t);
    try {
      if (t === "system") localStorage.removeItem(KEY);
      else localStorage.setItem(KEY, t);
    } catch {
      // storage refused (private mode): the choice lasts for this page
    }
  };
  return (
    <label class="theme">
      Theme{" "}
      <select
        value={theme}
        onChange={(e) => pick((e.target as HTMLSelectElement).value as Theme)}
      >
        <option value="system">system</option>
        <option value="light">light</option>
        <option value="dark">dark</option>
      </select>
    </label>
  );
}
