// Loading state for a view: the value, the error, and a reload, keyed by the inputs it reads.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

export interface Loaded<T> {
  data: T | null;
  error: unknown;
  reload: () => void;
}

export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<unknown>(null);
  const generation = useRef(0);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    setError(null);
    load().then((v) => {
      if (generation.current === mine) setData(v);
    }).catch((e) => {
      if (generation.current === mine) setError(e);
    });
  }, deps);
  useEffect(() => {
    setData(null);
    reload();
  }, [reload]);
  return { data, error, reload };
}

/** Re-runs `tick` every `ms` while `on`. */
export function useInterval(tick: () => void, ms: number, on = true) {
  const saved = useRef(tick);
  saved.current = tick;
  useEffect(() => {
    if (!on) return;
    const id = setInterval(() => saved.current(), ms);
    return () => clearInterval(id);
  }, [ms, on]);
}
