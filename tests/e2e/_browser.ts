// Shared by the web UI's browser tests: Debian's chromium through playwright-core, an axe-core
// accessibility check inside the page, checks that a page or its parts fit the window's width,
// and screenshots kept from the run.
import assert from "node:assert/strict";
import axe from "axe-core";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { isFile, missingReason } from "./_tools.ts";

export const CHROMIUM = "/usr/bin/chromium";

export const browserSkipReason = missingReason(
  "web UI browser",
  isFile(CHROMIUM) ? [] : ["chromium"],
  "apt-get install chromium",
);

// DESIGN.md's measured flags for Debian's chromium on these machines.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

export function launch(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ARGS });
}

const axeSource: string = axe.source;

export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  nodes: { target: string[] }[];
}

/** Runs axe-core in the page (or the part `within` selects); fails on any serious or critical
 * violation. */
export async function assertAccessible(page: Page, label: string, within?: string): Promise<void> {
  if (!(await page.evaluate(() => "axe" in globalThis))) {
    await page.addScriptTag({ content: axeSource });
  }
  const violations = await page.evaluate(async (sel) => {
    // deno-lint-ignore no-explicit-any
    const axe = (globalThis as any).axe;
    const r = await axe.run(sel ?? document, { resultTypes: ["violations"] });
    // deno-lint-ignore no-explicit-any
    return r.violations.map((v: any) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      // deno-lint-ignore no-explicit-any
      nodes: v.nodes.slice(0, 3).map((n: any) => ({ target: n.target })),
    }));
  }, within ?? null) as AxeViolation[];
  const bad = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
  assert.deepEqual(bad, [], `${label}: accessibility violations\n${JSON.stringify(bad, null, 2)}`);
}

/** Where the run keeps its screenshots (bench/out is not committed; docs/img holds the chosen). */
export const SCREENSHOT_DIR = Deno.env.get("WHARF_UI_SCREENSHOTS") ??
  new URL("../../bench/out/ui-screens/", import.meta.url).pathname;

export async function screenshot(page: Page, name: string): Promise<void> {
  await Deno.mkdir(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`), fullPage: false });
}

/** Sets the theme the way a user does (the picker) and checks it is applied. */
export async function pickTheme(page: Page, theme: "light" | "dark" | "system"): Promise<void> {
  await page.selectOption("label.theme select", theme);
  const attr = await page.evaluate(() => document.documentElement.getAttribute("data-theme"));
  assert.equal(attr, theme === "system" ? null : theme);
}

/** The page is no wider than the window. */
export async function assertFits(page: Page, what: string): Promise<void> {
  const [scroll, inner] = await page.evaluate(() => [
    document.documentElement.scrollWidth,
    innerWidth,
  ]);
  assert.ok(scroll <= inner, `${what}: the page is ${scroll} px wide in a ${inner} px window`);
}

/** Every element `selector` finds lies within the window's width and is visible. */
export async function assertInView(page: Page, selector: string, what: string): Promise<void> {
  const boxes = await page.$$eval(selector, (els) =>
    els.map((e) => {
      const r = e.getBoundingClientRect();
      return { left: r.left, right: r.right, width: r.width, height: r.height };
    }));
  assert.ok(boxes.length > 0, `${what}: nothing matches ${selector}`);
  const inner = await page.evaluate(() => innerWidth);
  for (const b of boxes) {
    assert.ok(b.width > 0 && b.height > 0, `${what}: ${selector} is not shown`);
    assert.ok(
      b.left >= 0 && b.right <= inner,
      `${what}: ${selector} spans ${b.left}-${b.right} in a ${inner} px window`,
    );
  }
}
