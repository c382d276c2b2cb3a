// The web UI's build: Vite + Preact (DESIGN.md, UI row). The output in ui/dist/ is committed, so a
// fresh clone's `deno task start` serves the UI without a build step and `deno compile` can embed
// it (`--include ui/dist`); tests/api/ui_test.ts checks it matches these sources.
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

export default defineConfig({
  plugins: [preact()],
  build: { outDir: "dist", emptyOutDir: true, assetsDir: "assets" },
});
