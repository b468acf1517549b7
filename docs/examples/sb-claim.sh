#!/usr/bin/env bash
# Print a system actor's claim headers (S15) for one API request, one "Name: value" per line,
# signed with its Ed25519 private key by OpenSSL 3 — for hosts without SchemaBridge installed.
#
#   sb-claim.sh KEY.pem ACTOR DEPLOYMENT WORKSPACE METHOD PATH [BODY_FILE] > claim.txt
#   curl -X POST "$BASE$PATH" -H "Authorization: Token $TOKEN" -H @claim.txt \
#        -H 'Content-Type: application/json' --data-binary @BODY_FILE
#
# DEPLOYMENT is the server's SB_DEPLOYMENT_ID (`manage.py sb_actor deployment` prints it);
# WORKSPACE is the slug of the workspace of $TOKEN. PATH is the path as sent, query string
# included; BODY_FILE holds the exact body bytes (none: an empty body). The format is in
# docs/security.md.
set -euo pipefail

if [ $# -lt 6 ]; then
    echo "usage: $0 KEY.pem ACTOR DEPLOYMENT WORKSPACE METHOD PATH [BODY_FILE]" >&2
    exit 2
fi
key=$1 actor=$2 deployment=$3 workspace=$4 path=$6 body=${7:-/dev/null}
method=$(printf '%s' "$5" | tr '[:lower:]' '[:upper:]')

timestamp=$(date +%s)
nonce=$(openssl rand -hex 16)
digest=$(openssl dgst -sha256 -r < "$body" | cut -d' ' -f1)
statement=$(mktemp)
trap 'rm -f "$statement"' EXIT
printf 'sb-claim-v2\n%s\n%s\n%s\n%s\n%s\n%s\n%s\n%s' \
    "$deployment" "$workspace" "$method" "$path" "$digest" "$timestamp" "$nonce" "$actor" > "$statement"
signature=$(openssl pkeyutl -sign -inkey "$key" -rawin -in "$statement" | openssl base64 -A)

printf 'X-SB-Actor: %s\nX-SB-Timestamp: %s\nX-SB-Nonce: %s\nX-SB-Signature: %s\n' \
    "$actor" "$timestamp" "$nonce" "$signature"
