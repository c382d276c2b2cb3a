// Structured logs: one JSON object per line on stderr. Never pass credentials or secrets.
type Fields = Record<string, unknown>;

function write(level: string, msg: string, fields?: Fields) {
  console.error(JSON.stringify({ ts: new Date().toISOString(), level, msg, ...fields }));
}

export const log = {
  info: (msg: string, fields?: Fields) => write("info", msg, fields),
  warn: (msg: string, fields?: Fields) => write("warn", msg, fields),
  error: (msg: string, fields?: Fields) => write("error", msg, fields),
};
