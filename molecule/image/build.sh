#!/usr/bin/env bash
# Build the Molecule base image without any registry: debootstrap a minimal Debian 12 with python3 and
# systemd, then `podman import` it. The image is tagged with a hash of this script, so a second run
# reuses it (a warm run costs nothing) and a change here rebuilds it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
name=${MOLECULE_IMAGE_NAME:-localhost/deployopen-debian12}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tag=$(sha256sum "$0" | cut -c1-12)
image="$name:$tag"

if podman image exists "$image"; then
  echo "image $image already built"
  podman tag "$image" "$name:latest"
  exit 0
fi

command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install debootstrap" >&2; exit 1; }
work=$(mktemp -d /var/tmp/deployopen-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"

echo "debootstrap bookworm into $root (minbase)"
debootstrap --variant=minbase \
  --include=python3,python3-apt,systemd,systemd-sysv,dbus,iproute2,procps,kmod,ca-certificates,sudo,gnupg,udev \
  bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log"; exit 1; }

cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb ${mirror%/debian}/debian-security bookworm-security main
EOF
# apt's cache_valid_time must see the lists as stale on first use in a container.
rm -rf "$root"/var/lib/apt/lists/* && mkdir -p "$root/var/lib/apt/lists/partial"
touch -d @0 "$root/var/lib/apt/lists"
# Units that make no sense in a container (consoles, hardware, kernel-bound mounts).
for unit in getty.target console-getty.service systemd-udev-trigger.service systemd-udevd.service \
            sys-kernel-config.mount sys-kernel-debug.mount sys-fs-fuse-connections.mount \
            systemd-remount-fs.service systemd-firstboot.service; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo "deployopen-molecule" >"$root/etc/hostname"
: >"$root/etc/machine-id"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/doc/* "$root"/usr/share/man/*

echo "importing $image"
tar -C "$root" -c . | podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' - "$image" >/dev/null
podman tag "$image" "$name:latest"
echo "built $image"
