#!/usr/bin/env bash
# Runs a command with a DynamoDB API (moto_server) on a free loopback port.
#
#   scripts/with-moto.sh cargo test -p mcs-store
#
# Creates the git-ignored venv .venv-moto with moto[server] when it is
# missing or holds another version (MOTO_SPEC overrides the pinned pip
# requirement), starts moto in the background through
# scripts/moto_server_serialized.py (moto_server handling one request at a
# time, so conditional writes are atomic as in DynamoDB; see that file),
# waits until it answers, exports MCS_TEST_DYNAMODB_ENDPOINT=
# http://127.0.0.1:<port> (plus a region and dummy credentials for other
# clients), runs the command, stops moto on exit and exits with the
# command's status.
set -euo pipefail

if [[ $# -eq 0 ]]; then
    echo "usage: $0 COMMAND [ARG...]" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv-moto"
# Pinned: the launcher uses moto's server module, not only its CLI.
moto_spec="${MOTO_SPEC:-moto[server]==5.2.5}"
stamp="$venv/.installed-spec"

if [[ ! -x "$venv/bin/moto_server" || "$(cat "$stamp" 2>/dev/null)" != "$moto_spec" ]]; then
    echo "with-moto: installing $moto_spec into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$moto_spec"
    echo "$moto_spec" >"$stamp"
fi

port="$("$venv/bin/python" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"
log="$(mktemp -t moto-server.XXXXXX.log)"

"$venv/bin/python" "$root/scripts/moto_server_serialized.py" -H 127.0.0.1 -p "$port" >"$log" 2>&1 &
moto_pid=$!

stop_moto() {
    if kill -0 "$moto_pid" 2>/dev/null; then
        kill "$moto_pid" 2>/dev/null || true
        wait "$moto_pid" 2>/dev/null || true
    fi
    rm -f "$log"
}
trap stop_moto EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

endpoint="http://127.0.0.1:$port"
# Any HTTP answer (even an error status) means the server is up.
ready=false
for _ in $(seq 1 150); do
    if "$venv/bin/python" - "$endpoint" <<'EOF' 2>/dev/null; then
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1] + "/moto-api/", timeout=1)
except urllib.error.HTTPError:
    pass
EOF
        ready=true
        break
    fi
    if ! kill -0 "$moto_pid" 2>/dev/null; then
        echo "with-moto: moto exited early:" >&2
        cat "$log" >&2
        exit 1
    fi
    sleep 0.2
done
if [[ "$ready" != true ]]; then
    echo "with-moto: moto did not answer on $endpoint within 30 s:" >&2
    cat "$log" >&2
    exit 1
fi
echo "with-moto: moto $("$venv/bin/python" -c 'import moto; print(moto.__version__)') on $endpoint" >&2

export MCS_TEST_DYNAMODB_ENDPOINT="$endpoint"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"

set +e
"$@"
status=$?
set -e
exit "$status"
