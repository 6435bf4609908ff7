"""The .deb `make dist` builds: its contents, lintian, an install into a throwaway root, the packaged binary.

The package comes from tests/packaging/debcache.py: built by the same script
as `make dist` (packaging/deb/build_deb.py), once per source state. It is
installed with dpkg into an empty root directory (``dpkg --root``), so the
host's own /usr is never touched, and the binary is run from there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sparksync import __version__
from sparksync.__main__ import NO_WINDOW_HINT
from tests.packaging import debcache

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

sys.path.insert(0, str(debcache.ROOT / "packaging" / "pyinstaller"))
from icons import HICOLOR_SIZES

APP_ID = "io.github.sparksync.SparkSync"
METAINFO = f"usr/share/metainfo/{APP_ID}.metainfo.xml"
DESKTOP = "usr/share/applications/sparksync.desktop"
# What Qt's xcb platform plugin and Qt's GUI library need from the system:
# the package must pull them in on a clean machine.
QT_SYSTEM_PACKAGES = {
    "libxcb-cursor0",
    "libxkbcommon-x11-0",
    "libxcb-icccm4",
    "libegl1",
    "libgl1",
    "libfontconfig1",
}
RUN_TIMEOUT_S = 180


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("timeout", RUN_TIMEOUT_S)
    return subprocess.run(cmd, capture_output=True, text=True, check=False, **kwargs)


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: run `make system-deps` as root", pytrace=False)
    return path


@pytest.fixture(scope="module")
def deb() -> Path:
    start = time.monotonic()
    path, built = debcache.cached_deb(log=lambda text: print(text))
    print(f"{'built' if built else 'reused'} {path} in {time.monotonic() - start:.0f} s")
    return path


def _dpkg_root(root: Path) -> list[str]:
    """dpkg acting on an empty system under ``root``, with its own database and log."""
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers", "var/log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name in ("status", "available"):
        (root / "var/lib/dpkg" / name).touch()
    # --force-depends: the throwaway root's database lists none of the host's libraries.
    return ["dpkg", f"--root={root}", f"--log={root / 'var/log/dpkg.log'}", "--force-depends"]


def _install(deb: Path, root: Path) -> Path:
    if os.geteuid() != 0:
        pytest.skip("installing with dpkg --root needs root")
    done = _run([*_dpkg_root(root), "--install", str(deb)])
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def installed(deb, tmp_path_factory) -> Path:
    return _install(deb, tmp_path_factory.mktemp("deb-root"))


def _field(deb: Path, name: str) -> str:
    return _run(["dpkg-deb", "--field", str(deb), name]).stdout.strip()


def _depends(deb: Path) -> set[str]:
    """Package names in Depends (alternatives included, versions dropped)."""
    return {
        re.split(r"[\s(:]", alt.strip())[0]
        for alt in re.split(r"[,|]", _field(deb, "Depends"))
        if alt.strip()
    }


def _app_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("QT_QPA_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY")}
    env.update(extra)
    return env


# --- the package as a file -------------------------------------------------------


def test_control_fields_name_the_version_the_architecture_and_qts_system_libraries(deb):
    assert deb.name == f"sparksync_{__version__}_{_run(['dpkg', '--print-architecture']).stdout.strip()}.deb"
    assert _field(deb, "Package") == "sparksync"
    assert _field(deb, "Version") == __version__
    missing = QT_SYSTEM_PACKAGES - _depends(deb)
    assert not missing, f"Depends lacks {sorted(missing)}: {_field(deb, 'Depends')}"


def test_contents_hold_the_app_launcher_desktop_entry_icons_and_metadata(deb):
    listing = _run(["dpkg-deb", "--contents", str(deb)]).stdout.splitlines()
    entries = {line.split()[5].lstrip("."): line for line in listing}  # path -> full ls-style line
    program = entries["/usr/lib/sparksync/sparksync"]
    assert program.startswith("-rwxr-xr-x root/root"), program
    for link in ("/usr/bin/sparksync", "/usr/bin/sparksync-gui"):
        assert entries[link].rstrip().endswith("-> ../lib/sparksync/sparksync"), link
    wanted = [f"/{DESKTOP}", f"/{METAINFO}", "/usr/share/doc/sparksync/copyright",
              "/usr/share/doc/sparksync/changelog.gz", "/usr/share/man/man1/sparksync.1.gz",
              "/usr/share/icons/hicolor/scalable/apps/sparksync.svg",
              *(f"/usr/share/icons/hicolor/{s}x{s}/apps/sparksync.png" for s in HICOLOR_SIZES)]  # fmt: skip
    assert [path for path in wanted if path not in entries] == []
    # Debian policy: nothing in /opt or /usr/local, and every file owned by root.
    assert not [p for p in entries if p.startswith(("/opt", "/usr/local", "/home", "/root"))]
    assert all(" root/root " in line for line in listing)


def test_lintian_finds_no_error_or_warning(deb):
    """The tags the bundle raises by design are overridden in the package, each with its reason:
    packaging/deb/lintian-overrides."""
    done = _run([_need("lintian"), "--tag-display-limit", "0", str(deb)], timeout=900)
    problems = [line for line in done.stdout.splitlines() if line.startswith(("E:", "W:"))]
    assert problems == [], "\n".join(problems)
    assert done.returncode == 0, done.stdout + done.stderr


# --- installed into a throwaway root ------------------------------------------------


def test_desktop_entry_and_appstream_metadata_validate(installed):
    done = _run([_need("desktop-file-validate"), str(installed / DESKTOP)])
    assert done.returncode == 0 and "error" not in done.stdout, done.stdout + done.stderr
    done = _run([_need("appstreamcli"), "validate", "--no-net", str(installed / METAINFO)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert f'<release version="{__version__}"' in (installed / METAINFO).read_text()
    desktop = (installed / DESKTOP).read_text()
    assert re.search(r"^Exec=sparksync$", desktop, re.MULTILINE) and re.search(
        r"^Icon=sparksync$", desktop, re.MULTILINE
    )


def test_icons_are_pngs_of_the_size_their_directory_names(installed):
    for size in HICOLOR_SIZES:
        data = (installed / f"usr/share/icons/hicolor/{size}x{size}/apps/sparksync.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert struct.unpack(">II", data[16:24]) == (size, size)
    master = (debcache.ROOT / "resources" / "sparksync.svg").read_bytes()
    assert (installed / "usr/share/icons/hicolor/scalable/apps/sparksync.svg").read_bytes() == master


def test_version_exits_0_and_prints_the_version(installed):
    done = _run([str(installed / "usr/bin/sparksync"), "--version"], env=_app_env())
    assert (done.returncode, done.stdout) == (0, f"sparksync {__version__}\n"), done.stderr
    done = _run([str(installed / "usr/bin/sparksync"), "agent", "version"], env=_app_env())
    assert done.returncode == 0 and done.stdout.startswith(f"sparksync-agent {__version__} "), done.stderr
    # By its other name the program is the app (what a login entry finds on PATH): the app's own --version.
    done = _run([str(installed / "usr/bin/sparksync-gui"), "--version"], env=_app_env())
    assert (done.returncode, done.stdout) == (0, f"sparksync-gui {__version__}\n"), done.stderr


def test_without_a_display_it_prints_the_help_and_why_no_window_opened(installed):
    done = _run([str(installed / "usr/bin/sparksync")], env=_app_env())
    assert done.returncode == 0, done.stderr
    assert "Usage: sparksync" in done.stdout and done.stdout.rstrip().endswith(NO_WINDOW_HINT), done.stdout


def test_desktop_entry_command_reaches_the_main_window_with_live_data_offscreen(installed):
    """What the menu entry runs (Exec=sparksync), offscreen: the window shows live data, then exits 0.
    Live data means the packaged binary also started its own agent (as ``sparksync -m sparksync_agent``)."""
    exec_line = re.search(r"^Exec=(.*)$", (installed / DESKTOP).read_text(), re.MULTILINE).group(1).split()
    command = [str(installed / "usr/bin" / exec_line[0]), *exec_line[1:]]
    env = _app_env(QT_QPA_PLATFORM="offscreen", SPARKSYNC_GUI_EXIT_AFTER_FIRST_SAMPLE="1")
    done = _run(command, env=env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_main_window_on_a_real_x_server_loads_qts_xcb_plugin(installed, tmp_path):
    """Under Xvfb Qt loads its xcb platform plugin, which needs the system libraries the package depends on."""
    xvfb_run = _need("xvfb-run")
    command = [xvfb_run, "-a", str(installed / "usr/bin/sparksync"), "gui", "--exit-after-first-sample"]
    done = _run(command, env=_app_env(QT_DEBUG_PLUGINS="1"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "libqxcb.so" in done.stderr  # Qt's plugin log: the xcb plugin, not a fallback, drew the window


def test_cli_commands_run_from_the_packaged_binary(installed):
    done = _run([str(installed / "usr/bin/sparksync"), "node", "status", "--json"], env=_app_env())
    assert done.returncode == 0, done.stderr
    node = json.loads(done.stdout)["nodes"][0]
    assert node["error"] is None and node["snapshot"]["info"]["agent_version"] == __version__


def test_the_agent_bundles_ship_and_the_installed_binary_finds_them(deb, installed, tmp_path):
    """Deploy from the package needs no pip and no internet: the bundles for a Spark (aarch64) and
    x86_64 hosts, with DGX OS's Python, are in the package, sound, and what the program offers."""
    from sparksync.core.bundle import SHIPPED_TARGETS

    names = sorted(t.bundle_name(__version__) for t in SHIPPED_TARGETS)
    listing = _run(["dpkg-deb", "--contents", str(deb)]).stdout
    assert [n for n in names if f"./usr/lib/sparksync/bundles/{n}\n" not in listing] == []
    env = _app_env(SPARKSYNC_HOME=str(tmp_path / "home"))  # a fresh user: nothing cached
    env.pop("SPARKSYNC_SHIPPED_BUNDLES", None)
    program = str(installed / "usr/bin/sparksync")
    done = _run([program, "bundle", "list", "--json"], env=env)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    shipped_dir = installed / "usr/lib/sparksync/bundles"
    assert [(b["source"], b["path"]) for b in listed["bundles"]] == [
        ("shipped", str(shipped_dir / n)) for n in names
    ]
    for name in names:  # each one passes the full check: manifest, checksums, wheel tags for its target
        done = _run([program, "bundle", "verify", str(shipped_dir / name)], env=env)
        assert done.returncode == 0 and "every checksum matches" in done.stdout, done.stderr


def test_every_system_library_the_bundle_links_comes_from_a_package_it_depends_on(deb, installed):
    """Direct NEEDED entries of every ELF file in the bundle: inside the bundle, or owned by a Depends package."""
    app = installed / "usr/lib/sparksync"
    elves = [
        p for p in app.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes()[:4] == b"\x7fELF"
    ]
    lib_dirs = sorted({str(p.parent) for p in elves if ".so" in p.name})
    env = {**os.environ, "LD_LIBRARY_PATH": ":".join(lib_dirs)}
    outside: dict[str, set[str]] = {}  # system path -> the bundle files that need it
    unresolved = []
    for elf in elves:
        needed = re.findall(r"^\s+NEEDED\s+(\S+)$", _run(["objdump", "-p", str(elf)]).stdout, re.MULTILINE)
        resolved = _ldd(elf, env)
        for name in needed:
            path = resolved.get(name)
            if path is None:
                unresolved.append(f"{name} (needed by {elf.relative_to(installed)})")
            elif not Path(path).resolve().is_relative_to(installed):
                outside.setdefault(path, set()).add(elf.name)
    assert unresolved == []
    owners = _owning_packages(outside)
    depends = _depends(deb)
    assert {p for p in outside if owners.get(p) not in depends} == set(), (owners, depends)


def _ldd(elf: Path, env: dict) -> dict[str, str]:
    """Library name -> the path the dynamic loader picks (the loader itself is listed by path only)."""
    out = _run(["ldd", str(elf)], env=env).stdout
    found = dict(re.findall(r"^\s+(\S+) => (/\S+) \(", out, re.MULTILINE))
    found.update({Path(p).name: p for p in re.findall(r"^\s+(/\S+) \(", out, re.MULTILINE)})
    return found


def _owning_packages(paths) -> dict[str, str]:
    """dpkg's owner of each path; merged-/usr systems list some libraries under /lib."""
    owners = {}
    for path in paths:
        for candidate in (path, str(Path(path).resolve()), re.sub(r"^/usr/lib/", "/lib/", path)):
            done = _run(["dpkg", "-S", candidate])
            if done.returncode == 0:
                owners[path] = done.stdout.split(":")[0].strip()
                break
    return owners


def test_purge_leaves_nothing_behind(deb, tmp_path):
    root = _install(deb, tmp_path / "root")
    assert (root / "usr/bin/sparksync").is_symlink()
    done = _run([*_dpkg_root(root), "--purge", "sparksync"])
    assert done.returncode == 0, done.stderr
    left = [str(p.relative_to(root)) for p in root.rglob("*") if p.relative_to(root).parts[:1] != ("var",)]
    assert left == []
