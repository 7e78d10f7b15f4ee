#!/bin/sh
# An image for trying containerised jobs without a registry: a root file system of its own
# (its /etc/os-release names it) whose /bin and /lib lead into /usr, which a job mounts from
# the host read-only (--container-mounts=/usr:/usr:ro). Run as root; prints the image's id.
set -eu
name="${1:-localhost/railyard-host:1}"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc" "$root/usr" "$root/home" "$root/proc" "$root/sys" "$root/dev" \
  "$root/run" "$root/root" "$root/tmp" "$root/var/tmp"
chmod 1777 "$root/tmp" "$root/var/tmp"
for dir in bin sbin lib lib64; do ln -s "usr/$dir" "$root/$dir"; done
printf 'NAME="railyard host image"\nID=railyard-host\nVERSION_ID=1\n' > "$root/etc/os-release"
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
echo 'root:x:0:' > "$root/etc/group"
tar -C "$root" -cf - . | podman import --quiet - "$name"
