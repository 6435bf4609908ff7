#!/usr/bin/env bash
# Installs the Debian packages the test suite and the app need, when run as root.
# Skips apt entirely when everything is already there, so repeated `make` runs stay fast.
set -euo pipefail
packages=(
  iproute2          # lab: network namespaces, veth, bridge
  procps            # ps/pkill used by lab teardown
  openssh-server    # lab: a real sshd per node namespace
  openssh-client    # ssh-keygen for fingerprints in tests
  sudo              # lab: each node's user is an administrator whose sudo asks for its password
  netplan.io        # lab: the fabric helper validates its netplan file with netplan generate
  iperf3            # lab: fabric link bandwidth checks
  iputils-ping      # lab: the fabric neighbour probe (ping ff02::1), jumbo pings
  dbus              # a session bus for the real keyring in tests
  gnome-keyring     # a real Secret Service backend for keyring tests
  ninja-build       # engines: fast llama.cpp builds (cmake falls back to make)
  cmake             # engines: configures the llama.cpp build
  g++               # engines: compiles llama.cpp
  nginx             # perf: the plain reverse proxy Switchyard is measured against
  avahi-utils       # perf: avahi-browse, the discovery anchor
  avahi-daemon      # perf: the daemon avahi-browse asks
  xvfb              # screenshots of the app on a virtual X screen
  xauth             # xvfb-run needs it
  # make dist and its smoke test: build, check and inspect the .deb
  dpkg-dev          # dpkg-shlibdeps works out the package's Depends
  binutils          # strip
  patchelf          # drops build-machine RUNPATHs from the bundle
  libpython3-dev    # the shared libpython PyInstaller bundles, for Debian's own python3
  desktop-file-utils  # desktop-file-validate
  appstream         # appstreamcli validate
  lintian           # the smoke test checks the .deb with it
  # the system libraries the packaged app links (its Depends; dpkg-shlibdeps
  # must find them at build time): Qt's xcb and Wayland platform plugins, GL
  libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
  libxcb-render-util0 libxcb-shape0 libxcb-xkb1 libxkbcommon-x11-0
  libwayland-client0 libwayland-cursor0 libwayland-egl1 libegl1 libgl1
  libfontconfig1 libdbus-1-3
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "warning: missing system packages: ${missing[*]} (install them with apt-get as root)" >&2
  exit 0
fi
echo "installing system packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
