// Buttons with a behaviour of their own: copy-to-clipboard, and the two-click delete (SPEC UI
// behaviour 2: the first click arms it, red; the second executes; a click elsewhere disarms).
import { useLayoutEffect, useRef, useState } from "preact/hooks";

export function CopyButton(
  { text, label = "Copy" }: { text: string; label?: string },
) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      // no clipboard permission (plain HTTP origin): select a hidden field and copy from it
      const t = document.createElement("textarea");
      t.value = text;
      document.body.appendChild(t);
      t.select();
      document.execCommand("copy");
      t.remove();
    }
    setDone(true);
    setTimeout(() => setDone(false), 1500);
  };
  return (
    <button
      type="button"
      class="copy"
      onClick={copy}
      aria-label={`${label}: ${text}`}
      data-copy={text}
    >
      {done ? "Copied" : label}
    </button>
  );
}

export function DeleteButton(
  { label, onConfirm, disabled }: {
    label: string;
    onConfirm: () => Promise<void> | void;
    disabled?: boolean;
  },
) {
  const [armed, setArmed] = useState(false);
  const [busy, setBusy] = useState(false);
  const ref = useRef<HTMLButtonElement>(null);
  // Attached as the armed state renders, not after the next paint (useEffect): a click elsewhere
  // right after arming must already disarm.
  useLayoutEffect(() => {
    if (!armed) return;
    const disarm = (e: Event) => {
      if (!ref.current?.contains(e.target as Node)) setArmed(false);
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") setArmed(false);
    };
    // capture: a click that another handler swallows still disarms
    document.addEventListener("click", disarm, true);
    document.addEventListener("keydown", onKey);
    return () => {
      document.removeEventListener("click", disarm, true);
      document.removeEventListener("keydown", onKey);
    };
  }, [armed]);
  const click = async () => {
    if (!armed) {
      setArmed(true);
      return;
    }
    setArmed(false);
    setBusy(true);
    try {
      await onConfirm();
    } finally {
      setBusy(false);
    }
  };
  return (
    <button
      ref={ref}
      type="button"
      class={armed ? "delete armed" : "delete"}
      data-armed={armed ? "true" : "false"}
      disabled={disabled || busy}
      onClick={click}
    >
      {busy ? "Deleting…" : armed ? `Click again to ${label.toLowerCase()}` : label}
    </button>
  );
}
