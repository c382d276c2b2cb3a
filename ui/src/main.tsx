// The single-page app: a top bar with the registry's name (GET /v2/_svc/ui/config) and the view
// the path names. Only the repository list exists so far; other paths say so.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { getJson, type UiConfig } from "./api.ts";
import { Repositories } from "./repositories.tsx";
import "./style.css";

function App() {
  const [name, setName] = useState("Wharf");
  useEffect(() => {
    getJson<UiConfig>("/v2/_svc/ui/config").then((c) => {
      setName(c.name);
      document.title = c.name;
    }).catch(() => {});
  }, []);
  const path = location.pathname;
  return (
    <>
      <header class="top">
        <a class="brand" href="/">{name}</a>
      </header>
      <main>
        {path === "/" ? <Repositories /> : <p>This view is not built yet: {path}</p>}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
