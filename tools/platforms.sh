#!/usr/bin/env bash
# The project's test suite on other CPython x OpenSSL pairs, in Debian roots made with
# debootstrap (root, Debian's archive and PyPI needed):
#
#   tools/platforms.sh                 every leg: host, trixie (3.13 / OpenSSL 3.5), sid (3.14 / 3.6)
#   tools/platforms.sh sid -- -x -q    one leg, with arguments for pytest
#   tools/platforms.sh sid --run CMD   any command in that leg's venv, e.g. the benchmark:
#                                      tools/platforms.sh sid --run python -m requests_fastssl bench
#
# Roots are cached in $REQUESTS_FASTSSL_PLATFORMS (default ~/.cache/requests-fastssl/platforms)
# and reused; the project is copied in fresh (git archive HEAD) on every run. Nothing is left
# mounted or written outside that folder, also when a leg fails.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${REQUESTS_FASTSSL_PLATFORMS:-$HOME/.cache/requests-fastssl/platforms}
declare -A PYTHON=([trixie]=python3.13 [sid]=python3.14)

legs=()
while [ $# -gt 0 ] && [ "$1" != "--" ] && [ "$1" != "--run" ]; do legs+=("$1"); shift; done
mode=pytest
if [ $# -gt 0 ] && [ "$1" = "--run" ]; then mode=run; shift; [ $# -gt 0 ] || { echo "platforms.sh: error: --run needs a command" >&2; exit 2; }
elif [ $# -gt 0 ]; then shift; fi
[ ${#legs[@]} -gt 0 ] || legs=(host trixie sid)
for leg in "${legs[@]}"; do
    if [ "$leg" != host ] && [ -z "${PYTHON[$leg]:-}" ]; then
        echo "platforms.sh: error: unknown leg $leg (host, trixie, sid)" >&2; exit 2
    fi
done

mounted=()
cleanup() { for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done; }
trap cleanup EXIT

run_host() {
    [ -x .venv/bin/python ] || { python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]'; }
    if [ $mode = run ]; then PATH="$PWD/.venv/bin:$PATH" "$@"; else .venv/bin/python -m pytest "$@"; fi
}

run_leg() {
    local leg=$1 python=${PYTHON[$1]}; shift
    local root=$cache/$leg
    if [ ! -x "$root/usr/bin/$python" ]; then
        command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
        rm -rf "$root" && mkdir -p "$root"
        echo "platforms.sh: building the $leg root in $root (a few minutes, once)" >&2
        debootstrap --variant=minbase --include="$python,$python-venv,ca-certificates,openssl" \
            "$leg" "$root" http://deb.debian.org/debian >/dev/null
    fi
    # pip inside the root reaches the index with the host's trust and name resolution.
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    mkdir -p "$root/etc/ssl/certs" && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
    for m in proc dev; do
        mountpoint -q "$root/$m" || { mount --bind "/$m" "$root/$m"; mounted+=("$root/$m"); }
    done
    rm -rf "$root/src" && mkdir -p "$root/src" && git archive HEAD | tar -x -C "$root/src"
    if [ ! -x "$root/venv/bin/python" ]; then chroot "$root" "$python" -m venv /venv; fi
    chroot "$root" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
        /venv/bin/pip install -q -e '/src[test]' >"$root/pip.log" 2>&1 || { cat "$root/pip.log" >&2; return 1; }
    local command=(/venv/bin/python -m pytest "$@")
    if [ $mode = run ]; then command=(env PATH=/venv/bin:/usr/bin:/bin "$@"); fi
    chroot "$root" /bin/sh -c 'cd /src && exec "$@"' sh "${command[@]}"
}

status=0
for leg in "${legs[@]}"; do
    echo "=== $leg ===" >&2
    if [ "$leg" = host ]; then run_host "$@" || status=1; else run_leg "$leg" "$@" || status=1; fi
done
exit $status
