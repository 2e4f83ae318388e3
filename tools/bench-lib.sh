# shellcheck shell=bash
# Sourced by the tools/bench-* scripts: installs what a benchmark needs, builds troupe when it is
# missing, and hands out free ports. Recording a result is tools/bench-record's job.
bench_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# bench_need PACKAGE...: apt-get installs the Debian/Ubuntu packages that are not installed yet,
# as root or with sudo (as tools/install-deps does).
bench_need() {
  local missing=() package
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo=(sudo)
    else
      echo "$(basename "$0"): needs ${missing[*]}; install them with: sudo apt-get install ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "$(basename "$0"): installing ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -q >&2
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
}

# bench_troupe: the path of the troupe binary, built first (tools/install-deps, tools/build)
# when build/tools/troupe is missing.
bench_troupe() {
  if [ ! -x "$bench_root/build/tools/troupe" ]; then
    "$bench_root/tools/install-deps" >&2
    "$bench_root/tools/build" >&2
  fi
  echo "$bench_root/build/tools/troupe"
}

# bench_free_port: a TCP port on 127.0.0.1 that the OS says is free now.
bench_free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
