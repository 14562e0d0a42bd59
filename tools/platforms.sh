#!/usr/bin/env bash
# The project's test suite on other CPython x OpenSSL pairs, in Debian roots made with
# debootstrap (root, Debian's archive and PyPI needed):
#
#   tools/platforms.sh                 every leg: host, trixie (3.13 / OpenSSL 3.5), sid (3.14 / 3.6),
#                                      sid-3.15 (3.15 / 3.6) and sid-pypy (PyPy 3.11 / 3.6): reported,
#                                      their failure does not fail the run
#   tools/platforms.sh sid -- -x -q    one leg, with arguments for pytest
#   tools/platforms.sh sid --run CMD   any command in that leg's venv, e.g. the benchmark:
#                                      tools/platforms.sh sid --run python -m requests_fastssl bench
#
# Roots are cached in $REQUESTS_FASTSSL_PLATFORMS (default ~/.cache/requests-fastssl/platforms)
# and reused; the project is copied in fresh (git archive HEAD) on every run. Nothing is left
# mounted or written outside that folder, also when a leg fails, but for the record below.
#
# Each pytest run of a leg (not --run) is recorded in tools/platform-runs.json, the leg's latest
# run only: its interpreter and OpenSSL as the leg's interpreter reports them, requests and
# urllib3 there, the commit and whether the tree had uncommitted changes, the date (UTC), the
# outcome with pytest's summary line and the command. docs/platforms.md quotes that file.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${REQUESTS_FASTSSL_PLATFORMS:-$HOME/.cache/requests-fastssl/platforms}
declare -A PYTHON=([trixie]=python3.13 [sid]=python3.14 [sid-3.15]=python3.15 [sid-pypy]=pypy3)
declare -A SUITE=([trixie]=trixie [sid]=sid [sid-3.15]=sid [sid-pypy]=sid)
# Legs whose failure is reported but does not change the exit status (interpreters whose
# third-party wheels may lag behind).
declare -A ALLOWED_TO_FAIL=([sid-3.15]=1 [sid-pypy]=1)
# PyPy: newer hypothesis releases ship no PyPy wheel and their sdist builds with Rust
# fetched from the network; an older wheel is the same test library.
declare -A PIP_EXTRA=([sid-pypy]=--prefer-binary)

legs=()
while [ $# -gt 0 ] && [ "$1" != "--" ] && [ "$1" != "--run" ]; do legs+=("$1"); shift; done
mode=pytest
if [ $# -gt 0 ] && [ "$1" = "--run" ]; then mode=run; shift; [ $# -gt 0 ] || { echo "platforms.sh: error: --run needs a command" >&2; exit 2; }
elif [ $# -gt 0 ]; then shift; fi
args=("$@")
[ ${#legs[@]} -gt 0 ] || legs=(host trixie sid sid-3.15 sid-pypy)
for leg in "${legs[@]}"; do
    if [ "$leg" != host ] && [ -z "${PYTHON[$leg]:-}" ]; then
        echo "platforms.sh: error: unknown leg $leg (host, trixie, sid, sid-3.15, sid-pypy)" >&2; exit 2
    fi
done

mounted=()
work=$(mktemp -d)
cleanup() { for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

started='' commit='' dirty=''
begin() {
    started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    commit=$(git rev-parse --short HEAD)
    # The facts file is left out, or the second of two legs run together would count as dirty.
    if [ -n "$(git status --porcelain -- . ':!tools/platform-runs.json')" ]; then dirty=1; else dirty=0; fi
}
record() {  # leg, exit status, the leg's facts (JSON), then --log FILE or --error TEXT
    python3 tools/record_platform_run.py record --leg "$1" --exit-status "$2" --facts "$3" \
        --started "$started" --commit "$commit" --dirty "$dirty" "${@:4}" -- "${args[@]}" \
        || echo "platforms.sh: warning: the $1 leg's run was not recorded" >&2
}
# Runs pytest (its arguments follow), showing its output and keeping it for the record.
pytest_recorded() {  # leg, facts, then the command
    local leg=$1 facts=$2 status=0; shift 2
    "$@" | tee "$work/pytest.log" || status=$?
    record "$leg" "$status" "$facts" --log "$work/pytest.log"
    return $status
}

run_host() {
    [ -x .venv/bin/python ] || { python3 -m venv .venv && .venv/bin/pip install -q -U pip && .venv/bin/pip install -q -e . --group test -c tools/constraints.txt; }
    if [ $mode = run ]; then PATH="$PWD/.venv/bin:$PATH" "$@"; return; fi
    begin
    local facts; facts=$(.venv/bin/python tools/record_platform_run.py facts) || facts=null
    echo "platforms.sh: $facts" >&2
    pytest_recorded host "$facts" .venv/bin/python -m pytest "$@"
}

run_leg() {
    local leg=$1 python=${PYTHON[$1]} suite=${SUITE[$1]}; shift
    local root=$cache/$suite venv=/venv-$python
    if [ ! -e "$root/.platforms-root-complete" ]; then
        command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
        rm -rf "$root" && mkdir -p "$root"
        echo "platforms.sh: building the $suite root in $root (a few minutes, once)" >&2
        debootstrap --variant=minbase --include="ca-certificates,openssl" \
            "$suite" "$root" http://deb.debian.org/debian >/dev/null
        touch "$root/.platforms-root-complete"
    fi
    # pip and apt inside the root reach the network with the host's trust and name resolution.
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mkdir -p "$root/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
    for m in proc dev; do
        mountpoint -q "$root/$m" || { mount --bind "/$m" "$root/$m"; mounted+=("$root/$m"); }
    done
    # git: the packaging test installs the project from a git URL of a repository it makes.
    if [ ! -x "$root/usr/bin/$python" ] || [ ! -x "$root/usr/bin/git" ] || ! chroot "$root" "$python" -c 'import ensurepip' 2>/dev/null; then
        # Debian's archive snapshots can carry an expired Release date; the packages are signed.
        chroot "$root" apt-get -o Acquire::Check-Valid-Until=false update -qq >/dev/null
        chroot "$root" env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq "$python" "$python-venv" git >/dev/null
    fi
    begin
    rm -rf "$root/src" && mkdir -p "$root/src" && git archive HEAD | tar -x -C "$root/src"
    if [ ! -x "$root$venv/bin/python" ]; then chroot "$root" "$python" -m venv "$venv"; fi
    local facts
    if ! chroot "$root" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
        sh -c "$venv/bin/pip install -q -U pip && $venv/bin/pip install -q ${PIP_EXTRA[$leg]:-} -e /src --group /src/pyproject.toml:test -c /src/tools/constraints.txt" \
        >"$root/pip.log" 2>&1; then
        cat "$root/pip.log" >&2
        if [ $mode = pytest ]; then
            facts=$(chroot "$root" "$venv/bin/python" /src/tools/record_platform_run.py facts) || facts=null
            record "$leg" 1 "$facts" --error "the installation failed: $(grep -v '^\s*$' "$root/pip.log" | tail -n 1)"
        fi
        return 1
    fi
    facts=$(chroot "$root" "$venv/bin/python" /src/tools/record_platform_run.py facts) || facts=null
    echo "platforms.sh: $facts" >&2
    if [ $mode = run ]; then
        chroot "$root" /bin/sh -c 'cd /src && exec "$@"' sh env "PATH=$venv/bin:/usr/bin:/bin" "$@"
        return
    fi
    pytest_recorded "$leg" "$facts" chroot "$root" /bin/sh -c 'cd /src && exec "$@"' sh "$venv/bin/python" -m pytest "$@"
}

status=0
for leg in "${legs[@]}"; do
    echo "=== $leg ===" >&2
    if [ "$leg" = host ]; then run_host "$@" && continue
    else run_leg "$leg" "$@" && continue; fi
    if [ -n "${ALLOWED_TO_FAIL[$leg]:-}" ]; then
        echo "platforms.sh: the $leg leg failed (reported; allowed to fail)" >&2
    else
        echo "platforms.sh: the $leg leg failed" >&2; status=1
    fi
done
exit $status
