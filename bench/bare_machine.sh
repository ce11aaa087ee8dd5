#!/usr/bin/env bash
# The README's first command on a bare Debian 12, measured: debootstrap makes a minimal bookworm root
# (minbase, plus git and ca-certificates to clone; this machine's extra CA certificates are copied in, for
# a TLS-inspecting proxy), a fresh clone of this repository's HEAD goes into it, and
# `scripts/train_digits.sh` runs there under chroot, every output line stamped with the seconds since the
# start. Prints the wall time, the packages and disk space it installed, whether any test or PyTorch
# package came with it, and what `scripts/setup.sh --dev` would add (apt's figures, nothing installed).
#
#   bench/bare_machine.sh [ROOT]     (as root; ROOT defaults to /tmp/ringtrain-bare, removed first)
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "bare_machine: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${1:-/tmp/ringtrain-bare}
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null

cleanup() { for m in src dev/shm dev/pts dev sys proc; do umount "$ROOT/$m" 2>/dev/null || true; done; }
trap cleanup EXIT
cleanup
rm -rf "$ROOT"
debootstrap --variant=minbase bookworm "$ROOT" http://deb.debian.org/debian > "$ROOT.debootstrap.log" 2>&1
for m in proc sys dev dev/pts dev/shm; do mount --bind "/$m" "$ROOT/$m"; done
mkdir -p "$ROOT/src" && mount --bind -o ro "$REPO" "$ROOT/src"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
printf '%s\n' "deb http://deb.debian.org/debian bookworm main" "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main" > "$ROOT/etc/apt/sources.list"
chroot "$ROOT" bash -c 'apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git ca-certificates >/dev/null'
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates >/dev/null
fi

cat > "$ROOT/root/measure.sh" <<'IN'
#!/bin/bash
set -eo pipefail
size() { dpkg-query -W -f='${Installed-Size}\n' | awk '{s+=$1} END {print s}'; }
count() { dpkg-query -W -f='${Package}\n' | wc -l; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
before=$(size); n0=$(count)
git clone -q /src /root/rt && cd /root/rt && echo "commit: $(git log --oneline -1)"
start=$(date +%s)
scripts/train_digits.sh 2>&1 | while IFS= read -r line; do echo "[$(( $(date +%s) - start ))s] $line"; done > /root/main.log
echo "main command: $(( $(date +%s) - start )) s, $(nproc) cores, load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "installed: $(( $(count) - n0 )) packages, +$(( ($(size) - before) / 1024 )) MiB"
grep -E "Need to get|After this operation|Setting up" /root/main.log | sed -n '1,2p;$p' | cut -c1-100
grep -E "setup: built|digits: converted|test accuracy:" /root/main.log | cut -c1-100
for p in python3-torch python3-torchvision python3 libgtest-dev clang libdnnl-dev nodejs npm; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" && echo "INSTALLED: $p" || echo "not installed: $p"
done
echo "scripts/setup.sh --dev would add:"
dev=$(sed -n '/^DEV_PACKAGES=(/,/^)/p' scripts/setup.sh | sed '1d;$d' | sed 's/#.*//' | tr '\n' ' ')
apt-get install --assume-no --no-install-recommends $dev > /root/dev.log 2>&1 < /dev/null || true
grep -E "newly installed|Need to get|After this operation" /root/dev.log || tail -5 /root/dev.log
IN
chmod +x "$ROOT/root/measure.sh"
chroot "$ROOT" /root/measure.sh
