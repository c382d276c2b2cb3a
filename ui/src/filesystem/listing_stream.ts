// Reading a layer listing while it downloads. A 100k-entry listing is ~37 MB of JSON that the
// server streams out over seconds; `response.json()` would wait for the last byte and then parse
// it all at once, adding its parse time to the wait. Here the `entries` array is cut into
// complete entry objects as chunks arrive and each batch is parsed at once, so the parse overlaps
// the download. Everything else of the listing (a few scalars) is parsed at the end.
import type { LayerEntry, LayerListing } from "./model.ts";

const QUOTE = 34, BACKSLASH = 92, OPEN_OBJ = 123, CLOSE_OBJ = 125, OPEN_ARR = 91, CLOSE_ARR = 93;

/**
 * The listing in `body`. Its entries go to `onEntries` batch by batch as they arrive when given
 * (the returned listing then has none), else into the returned listing.
 */
export async function readListing(
  body: ReadableStream<Uint8Array>,
  onEntries?: (batch: LayerEntry[]) => void,
): Promise<LayerListing> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const entries: LayerEntry[] = [];
  let rest = ""; // the listing without its entries
  let buf = ""; // text not consumed yet; positions below are in it
  let pos = 0; // next character to scan
  let depth = 0;
  let inString = false;
  let escaped = false;
  let inEntries = false;
  let entryStart = -1; // first complete entry not parsed yet
  let openStart = -1; // the entry being read
  let lastEnd = -1; // end of the last complete entry
  const parse = (from: number, to: number) => {
    if (from < 0 || to <= from) return;
    const batch: LayerEntry[] = JSON.parse(`[${buf.slice(from, to)}]`);
    if (onEntries) onEntries(batch);
    else for (const e of batch) entries.push(e);
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    for (; pos < buf.length; pos++) {
      const c = buf.charCodeAt(pos);
      if (inString) {
        if (escaped) escaped = false;
        else if (c === BACKSLASH) escaped = true;
        else if (c === QUOTE) inString = false;
      } else if (c === QUOTE) inString = true;
      else if (c === OPEN_OBJ || c === OPEN_ARR) {
        depth++;
        if (inEntries && depth === 3) {
          openStart = pos;
          if (entryStart < 0) entryStart = pos;
        } else if (
          !inEntries && depth === 2 && c === OPEN_ARR &&
          /"entries"\s*:\s*\[$/.test(buf.slice(Math.max(0, pos - 64), pos + 1))
        ) {
          rest += buf.slice(0, pos + 1);
          buf = buf.slice(pos + 1);
          pos = -1;
          inEntries = true;
        }
      } else if (c === CLOSE_OBJ || c === CLOSE_ARR) {
        depth--;
        if (inEntries && depth === 2) lastEnd = pos + 1;
        else if (inEntries && depth === 1) {
          // the array closes: its last entries are parsed, what follows belongs to `rest`
          parse(entryStart, lastEnd);
          buf = buf.slice(pos);
          pos = 0;
          inEntries = false;
          entryStart = openStart = lastEnd = -1;
        }
      }
    }
    if (inEntries && entryStart >= 0 && lastEnd > entryStart) {
      parse(entryStart, lastEnd);
      buf = buf.slice(lastEnd);
      pos -= lastEnd;
      // an entry still open at the cut is the first of the next batch
      openStart = depth >= 3 ? openStart - lastEnd : -1;
      entryStart = openStart;
      lastEnd = -1;
    }
  }
  const listing = JSON.parse(rest + buf + decoder.decode()) as LayerListing;
  listing.entries = entries;
  return listing;
}
