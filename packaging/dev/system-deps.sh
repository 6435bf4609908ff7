#!/usr/bin/env bash
# Installs the Debian packages the test suite and the app need, when run as root.
# Skips apt entirely when everything is already there, so repeated `make` runs stay fast.
set -euo pipefail
packages=(
  iproute2          # lab: network namespaces, veth, bridge
  procps            # ps/pkill used by lab teardown
  openssh-server    # lab: a real sshd per node namespace
  sudo              # lab: each node's user is an administrator whose sudo asks for its password
  netplan.io        # lab: the fabric helper validates its netplan file with netplan generate
  iperf3            # lab: fabric link bandwidth checks
  iputils-ping      # lab: the fabric neighbour probe (ping ff02::1), jumbo pings
  openssh-client    # ssh-keygen for fingerprints in tests; ssh for node-to-node model copies
  rsync             # model copies (this computer and the nodes; DGX OS ships it)
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
# Another apt or dpkg (unattended-upgrades, a second `make`) may hold a lock: wait
# for it rather than fail at once. Installing waits with apt's own option
# (DPkg::Lock::Timeout, for the dpkg lock); `apt-get update` has none for the
# lists lock (apt 2.6), so it is tried again while that lock is held.
lock_timeout="${SPARKSYNC_APT_LOCK_TIMEOUT:-600}"
lock=(-o "DPkg::Lock::Timeout=${lock_timeout}")
echo "installing system packages: ${missing[*]}"
echo "(if another apt or dpkg holds its lock, waiting for it up to ${lock_timeout} s)"
export DEBIAN_FRONTEND=noninteractive
deadline=$((SECONDS + lock_timeout))
until update_err=$(apt-get "${lock[@]}" update -qq 2>&1 >/dev/null); do
  if [[ "$update_err" != *"Could not get lock"* ]] || [ "$SECONDS" -ge "$deadline" ]; then
    echo "$update_err" >&2
    exit 100
  fi
  echo "apt's package lists are locked by another process; waiting..." >&2
  sleep 2
done
apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
