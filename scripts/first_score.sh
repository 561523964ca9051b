#!/usr/bin/env bash
# Start the REST service on the embedded defaults (offline lexicon judge, SQLite job store),
# show a first score with curl, then stop it. `make serve` keeps a service running instead.
set -euo pipefail
BIN=${BIN:-.venv/bin}
DATA_DIR=${DATA_DIR:-out/service}
PORT=${PORT:-$("$BIN/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
URL="http://127.0.0.1:$PORT"

mkdir -p "$DATA_DIR"
"$BIN/faithjudge" serve --host 127.0.0.1 --port "$PORT" --data-dir "$DATA_DIR" \
  --log-level warning >"$DATA_DIR/serve.log" 2>&1 &
SERVER=$!
stop() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
}
trap stop EXIT

for _ in $(seq 1 100); do
  curl -fs "$URL/readyz" >/dev/null 2>&1 && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$DATA_DIR/serve.log" >&2; exit 1; }
  sleep 0.2
done
curl -fs "$URL/readyz" >/dev/null || { echo "the service did not become ready" >&2; exit 1; }

echo "a first score from the service at $URL (stopped again below):"
echo "  head -1 examples/demo.jsonl | curl -s -H 'content-type: application/json' --data-binary @- $URL/v1/score"
head -1 examples/demo.jsonl \
  | curl -fsS -H 'content-type: application/json' --data-binary @- "$URL/v1/score" \
  | "$BIN/python" -c 'import json, sys
r = json.load(sys.stdin)
print("  item", r["item_id"], "| answer", r.get("answer"), "| correct", r.get("correct"))
for name, m in sorted((r.get("metrics") or {}).items()):
    print("  " + name + ":", m["status"], "score", m.get("score"))'
trap - EXIT
stop
echo "the service is stopped; \`make serve\` keeps one running at http://127.0.0.1:8000"
