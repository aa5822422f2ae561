#!/usr/bin/env bash
# scripts/apt-suite against stubbed apt folders: the bookworm-backports
# entry scripts/setup writes takes the address (a local mirror or proxy
# here) and key file of the machine's own bookworm source, from one-line
# and deb822 files, skipping other suites, deb-src, comments and disabled
# stanzas; no source for the suite fails with a message. And no file of
# the project names an archive host.
#   tests/apt_suite_test.sh SOURCE_ROOT
set -uo pipefail
root=${1:?usage: apt_suite_test.sh SOURCE_ROOT}
tool="$root/scripts/apt-suite"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

check() { # name, want (the stanza), APT_DIR
  local got
  got=$(APT_DIR="$3" "$tool" bookworm bookworm-backports 2>&1)
  if [ "$got" = "$2" ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    printf 'FAILED %s:\n--- want\n%s\n--- got\n%s\n' "$1" "$2" "$got" >&2
  fi
}

mirror=http://127.0.0.1:3142/debian
want_keyed=$(printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: %s' \
  "$mirror" /usr/share/keyrings/local-mirror.gpg)
want_plain=$(printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main' "$mirror")

# one-line entries: security first, a comment and a deb-src on other
# addresses, then the suite with options in brackets
d="$tmp/oneline"
mkdir -p "$d/sources.list.d"
cat >"$d/sources.list" <<EOF
# deb http://127.0.0.9/old bookworm main
deb http://127.0.0.1:3142/debian-security bookworm-security main
deb-src http://127.0.0.8/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/local-mirror.gpg] $mirror bookworm main contrib
EOF
check "one-line sources.list" "$want_keyed" "$d"

# deb822 in sources.list.d: a disabled stanza first, then the suite among
# others, its key a file
d="$tmp/deb822"
mkdir -p "$d/sources.list.d"
cat >"$d/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://127.0.0.7/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb deb-src
# a comment between fields
URIs: $mirror http://127.0.0.6/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/local-mirror.gpg

Types: deb
URIs: http://127.0.0.1:3142/debian-security
Suites: bookworm-security
Components: main
EOF
check "deb822 .sources" "$want_keyed" "$d"

# a one-line .list in sources.list.d without a key file; and a deb822 key
# given inline (continued lines): no Signed-By is copied
d="$tmp/list-d"
mkdir -p "$d/sources.list.d"
echo "deb $mirror bookworm main" >"$d/sources.list.d/mirror.list"
check "sources.list.d/*.list" "$want_plain" "$d"
d="$tmp/inline-key"
mkdir -p "$d/sources.list.d"
printf 'Types: deb\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By:\n -----BEGIN PGP PUBLIC KEY BLOCK-----\n .\n mQINBF\n -----END PGP PUBLIC KEY BLOCK-----\n' \
  "$mirror" >"$d/sources.list.d/debian.sources"
check "deb822 inline key" "$want_plain" "$d"

# nothing serves bookworm: exit 1 and say so
d="$tmp/none"
mkdir -p "$d/sources.list.d"
echo "deb $mirror trixie main" >"$d/sources.list"
if out=$(APT_DIR="$d" "$tool" bookworm bookworm-backports 2>&1); then
  failed=$((failed + 1))
  echo "FAILED no source: exit 0 ($out)" >&2
elif [[ "$out" != *"no enabled apt source serves bookworm"* ]]; then
  failed=$((failed + 1))
  echo "FAILED no source: message: $out" >&2
else
  passed=$((passed + 1))
fi

# the project names no archive host (setup takes the machine's)
hosts=$(cd "$root" && git ls-files 2>/dev/null | grep -v '^tests/interop/node/package-lock.json$' |
  grep -v '^bench/peers/package-lock.json$' |
  xargs grep -lIE 'deb\.debian\.org|ftp\.[a-z.]*debian\.org|archive\.ubuntu\.com' 2>/dev/null)
if [ -n "$hosts" ]; then
  failed=$((failed + 1))
  echo "FAILED archive hosts named in: $hosts" >&2
else
  passed=$((passed + 1))
fi

echo "apt-suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
