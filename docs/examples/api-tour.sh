#!/usr/bin/env bash
# A tour of the SchemaBridge REST API with curl: publish a fan-out workflow, start it with an
# Idempotency-Key, follow it, list its failed children, repair the cause and retry them.
#
#   make run                                   # in another terminal (serves the demo ledger too)
#   export TOKEN=$(.venv/bin/python manage.py sb_token create --role author | tail -n 1)
#   BASE=http://localhost:8000 docs/examples/api-tour.sh
#
# BASE     the app's URL (default http://localhost:8000)
# TOKEN    an API token with the author role (publishing needs it; operator does the rest)
# RUN      a label for this run's Idempotency-Key (default: the time), so the tour can rerun
# TIMEOUT  seconds to wait for the fan-out at each stage (default 120)
set -euo pipefail

BASE=${BASE:-http://localhost:8000}
: "${TOKEN:?set TOKEN to an author token: manage.py sb_token create --role author | tail -n 1}"
RUN=${RUN:-$(date +%s)}
TIMEOUT=${TIMEOUT:-120}
PYTHON=${PYTHON:-python3}
API="$BASE/api/v1"

if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
say() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }

# api METHOD PATH [curl args…]: one authenticated JSON call; fails on any 4xx/5xx and shows
# the problem body.
api() {
  local method=$1 path=$2
  shift 2
  curl --silent --show-error --fail-with-body -X "$method" "$API$path" \
    -H "Authorization: Token $TOKEN" -H "Content-Type: application/json" "$@"
}

# json EXPRESSION: evaluate a Python expression over the JSON document on stdin (bound to d).
json() { "$PYTHON" -c 'import json, sys; d = json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }

# follow ID: print status and child counts until the execution is terminal.
follow() {
  local deadline=$((SECONDS + TIMEOUT)) status
  while :; do
    status=$(api GET "/executions/$1" | json '"%s %s" % (d["status"], d["counts"])')
    echo "  $status"
    case $status in SUCCEEDED* | FAILED* | CANCELLED*) break ;; esac
    if ((SECONDS > deadline)); then echo "timed out after ${TIMEOUT}s" >&2; exit 1; fi
    sleep 1
  done
}

say "1. A destination for the ledger (misconfigured on purpose: the tour repairs it later)"
if [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Token $TOKEN" "$API/destinations/tour-ledger")" = 200 ]; then
  api PATCH /destinations/tour-ledger -d "{\"base_url\": \"$BASE/demo/ledger-typo\"}" | "$PYTHON" -m json.tool
else
  api POST /destinations -d "{\"name\": \"tour-ledger\", \"base_url\": \"$BASE/demo/ledger-typo\",
                              \"concurrency_limit\": 4}" | "$PYTHON" -m json.tool
fi

say "2. Publish the child (one ledger write per entry) and the fan-out parent"
api POST /workflows/tour-entry/versions -d '{
  "start": "post",
  "vertices": {
    "post": {"type": "HTTP", "destination": "tour-ledger", "method": "POST", "path": "/entries",
             "body": "$.input", "retry": {"maxAttempts": 1}, "next": "done"},
    "done": {"type": "SUCCEED", "output": "$.steps.post.output.body"}
  }
}' | "$PYTHON" -m json.tool
api POST /workflows/tour-migration/versions -d '{
  "start": "fan",
  "vertices": {
    "fan":  {"type": "SPAWNER", "items": "$.input.entries", "workflow": "tour-entry", "next": "join"},
    "join": {"type": "MERGE", "spawner": "fan", "next": "done"},
    "done": {"type": "SUCCEED"}
  }
}' | "$PYTHON" -m json.tool

say "3. Start the fan-out over 12 entries with an Idempotency-Key"
BODY=$("$PYTHON" -c 'import json; print(json.dumps({"workflow": "tour-migration", "input": {"entries": [
    {"id": "tour-%03d" % i, "account": "acct-%d" % (i % 3), "amountCents": 100 * i} for i in range(12)]}}))')
STARTED=$(api POST /executions -H "Idempotency-Key: tour-$RUN" -d "$BODY")
ID=$(echo "$STARTED" | json 'd["id"]')
echo "$STARTED" | "$PYTHON" -m json.tool
echo "Repeating the same request returns the same execution (HTTP 200, not a second one):"
curl --silent --show-error --fail-with-body -o /dev/null -w '  HTTP %{http_code}\n' -X POST "$API/executions" \
  -H "Authorization: Token $TOKEN" -H "Content-Type: application/json" -H "Idempotency-Key: tour-$RUN" -d "$BODY"
test "$(api POST /executions -H "Idempotency-Key: tour-$RUN" -d "$BODY" | json 'd["id"]')" = "$ID"

say "4. Follow it (every child's write fails: the ledger URL is wrong, so the merge fails)"
follow "$ID"

say "5. List the failed children, five per page"
PAGE="/executions/$ID/children?status=FAILED&limit=5"
while [ -n "$PAGE" ]; do
  RESULT=$(api GET "$PAGE")
  echo "$RESULT" | json '"\n".join("  #%s %s: %s" % (c["item_index"], c["id"], c["error"][:90]) for c in d["results"])'
  PAGE=$(echo "$RESULT" | json '(d["next"] or "").split("/api/v1", 1)[-1]')
done

say "6. Repair the destination's URL"
api PATCH /destinations/tour-ledger -d "{\"base_url\": \"$BASE/demo/ledger\"}" | "$PYTHON" -m json.tool

say "7. Retry every failed child; the parent's merge re-evaluates when they finish"
api POST "/executions/$ID/children/retry-failed" | "$PYTHON" -m json.tool
follow "$ID"

say "8. The result"
STATUS=$(api GET "/executions/$ID" | json 'd["status"]')
api GET "/executions/$ID" | json '"  status %s, version %s, counts %s" % (d["status"], d["version"][:12], d["counts"])'
test "$STATUS" = SUCCEEDED
