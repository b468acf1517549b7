#!/usr/bin/env bash
# Print a system actor's claim headers (S15) for one API request, one "Name: value" per line,
# signed with its Ed25519 private key by OpenSSL 3 — for hosts without SchemaBridge installed.
#
#   sb-claim.sh KEY.pem ACTOR METHOD PATH [BODY_FILE] > claim.txt
#   curl -X POST "$BASE$PATH" -H "Authorization: Token $TOKEN" -H @claim.txt \
#        -H 'Content-Type: application/json' --data-binary @BODY_FILE
#
# PATH is the path as sent, query string included; BODY_FILE holds the exact body bytes
# (none: an empty body). The format is in docs/security.md.
set -euo pipefail

if [ $# -lt 4 ]; then
    echo "usage: $0 KEY.pem ACTOR METHOD PATH [BODY_FILE]" >&2
    exit 2
fi
key=$1 actor=$2 method=$(printf '%s' "$3" | tr '[:lower:]' '[:upper:]') path=$4 body=${5:-/dev/null}

timestamp=$(date +%s)
nonce=$(openssl rand -hex 16)
digest=$(openssl dgst -sha256 -r < "$body" | cut -d' ' -f1)
statement=$(mktemp)
trap 'rm -f "$statement"' EXIT
printf 'sb-claim-v1\n%s\n%s\n%s\n%s\n%s\n%s' "$method" "$path" "$digest" "$timestamp" "$nonce" "$actor" > "$statement"
signature=$(openssl pkeyutl -sign -inkey "$key" -rawin -in "$statement" | openssl base64 -A)

printf 'X-SB-Actor: %s\nX-SB-Timestamp: %s\nX-SB-Nonce: %s\nX-SB-Signature: %s\n' \
    "$actor" "$timestamp" "$nonce" "$signature"
