"""Build the desktop app with PyInstaller and wrap it into a .deb.

    python packaging/deb/build_deb.py [--out dist] [--work build/deb]

Run it with the project's virtual environment (``make dist`` does): PyInstaller
bundles the Python it runs under. The package installs

- the one-folder app in /usr/lib/sparksync and /usr/bin/sparksync linking to it,
- the offline agent bundles deploy needs, in /usr/lib/sparksync/bundles (the
  app has no pip to build them; agent_bundles.py builds them here, cached),
- the desktop entry, hicolor icons rendered from resources/sparksync.svg,
- AppStream metadata, a manual page, the copyright file and a changelog.

Its Depends come from dpkg-shlibdeps over every ELF file in the bundle: the
bundle carries Python, Qt and the wheels' own libraries; the system libraries
PyInstaller left out on purpose (see the spec) are what the package depends on.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SPEC = ROOT / "packaging" / "pyinstaller" / "sparksync.spec"
RESOURCES = ROOT / "resources"
APP_ID = "io.github.sparksync.SparkSync"
PACKAGE = "sparksync"
APP_DIR = Path("usr/lib") / PACKAGE
BUNDLES_DIR = APP_DIR / "bundles"  # where sparksync.core.bundle.shipped looks: beside the program
sys.path.insert(0, str(ROOT / "packaging" / "pyinstaller"))  # icons.py
sys.path.insert(0, str(ROOT / "agent"))  # the version's single source
sys.path.insert(0, str(HERE))  # agent_bundles.py


class BuildError(Exception):
    """A step of the package build failed; the message says which and why."""


def version() -> str:
    from sparksync_agent._version import __version__

    return __version__


def deb_arch() -> str:
    return _run(["dpkg", "--print-architecture"]).strip()


def deb_name(ver: str, arch: str) -> str:
    return f"{PACKAGE}_{ver}_{arch}.deb"


# --- the steps ----------------------------------------------------------------


def run_pyinstaller(work: Path) -> Path:
    """The one-folder app, built from the spec under ``work``."""
    dist, build = work / "pyinstaller-dist", work / "pyinstaller-build"
    cmd = [sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
           "--distpath", str(dist), "--workpath", str(build), str(SPEC)]  # fmt: skip
    _run(cmd, what="PyInstaller", env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, capture=False)
    app = dist / PACKAGE
    if not (app / PACKAGE).is_file():
        raise BuildError(f"PyInstaller finished but {app / PACKAGE} is missing")
    return app


def stage(app: Path, root: Path, ver: str, bundles: list[Path]) -> None:
    """Lay the package's files out under ``root`` as they will be installed."""
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(app, root / APP_DIR, symlinks=True)
    for bundle in bundles:
        _copy(bundle, root / BUNDLES_DIR / bundle.name)
    _link(root / "usr/bin" / PACKAGE, Path("..") / "lib" / PACKAGE / PACKAGE)
    # The same program; by this name it opens the app, as a source install's sparksync-gui does.
    _link(root / "usr/bin" / f"{PACKAGE}-gui", Path("..") / "lib" / PACKAGE / PACKAGE)
    _copy(RESOURCES / "sparksync.desktop", root / "usr/share/applications/sparksync.desktop")
    from icons import render_hicolor

    render_hicolor(root / "usr/share/icons/hicolor", PACKAGE)
    metainfo = (RESOURCES / f"{APP_ID}.metainfo.xml.in").read_text()
    metainfo = metainfo.replace("@VERSION@", ver).replace("@DATE@", _release_date())
    _write(root / f"usr/share/metainfo/{APP_ID}.metainfo.xml", metainfo)
    doc = root / "usr/share/doc" / PACKAGE
    _copy(HERE / "copyright", doc / "copyright")
    _gzip(debian_changelog(ver).encode(), doc / "changelog.gz")
    _gzip((HERE / "sparksync.1").read_bytes(), root / "usr/share/man/man1/sparksync.1.gz")
    _link(root / "usr/share/man/man1/sparksync-gui.1.gz", Path("sparksync.1.gz"))
    _copy(HERE / "lintian-overrides", root / "usr/share/lintian/overrides" / PACKAGE)
    _tidy_elves(root / APP_DIR)
    _normalise_modes(root)


def debian_changelog(ver: str) -> str:
    """This version's CHANGELOG.md section in the Debian changelog format dpkg and lintian read."""
    entries: list[str] = []  # "[ heading ]" lines and bullets, each one logical line
    inside = False
    for line in (ROOT / "CHANGELOG.md").read_text().splitlines():
        if line.startswith("## "):
            inside = line[3:].split()[0] == ver
        elif inside and line.startswith("### "):
            entries.append(f"[ {line[4:].strip()} ]")
        elif inside and line.startswith("- "):
            entries.append("* " + line[2:].strip())
        elif inside and line.startswith("  ") and entries:
            entries[-1] += " " + line.strip()
    lines = [
        textwrap.fill(entry, 78, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False) if entry.startswith("*")
        else ("\n  " + entry if i else "  " + entry)
        for i, entry in enumerate(entries or [f"* Release {ver}."])
    ]  # fmt: skip
    maintainer = next(
        ln for ln in (HERE / "control.in").read_text().splitlines() if ln.startswith("Maintainer:")
    )
    when = _release_time().strftime("%a, %d %b %Y %H:%M:%S +0000")
    return (
        f"{PACKAGE} ({ver}) unstable; urgency=medium\n\n" + "\n".join(lines)
        + f"\n\n -- {maintainer.split(':', 1)[1].strip()}  {when}\n"
    )  # fmt: skip


def smoke(root: Path, ver: str) -> None:
    """The staged program still starts after strip and patchelf went over its libraries,
    and finds (and verifies) the agent bundles it ships."""
    program = str(root / "usr/bin" / PACKAGE)
    with tempfile.TemporaryDirectory() as home:
        env = {k: v for k, v in os.environ.items() if k != "SPARKSYNC_SHIPPED_BUNDLES"}
        env["SPARKSYNC_HOME"] = home
        out = _run([program, "--version"], what="the staged sparksync --version", env=env)
        listed = _run([program, "bundle", "list", "--json"], what="the staged sparksync bundle list", env=env)
    if out.strip() != f"{PACKAGE} {ver}":
        raise BuildError(f"the staged sparksync --version printed {out!r}, not '{PACKAGE} {ver}'")
    found = sorted(Path(b["path"]).name for b in json.loads(listed)["bundles"] if b["source"] == "shipped")
    shipped = _names(root / BUNDLES_DIR)
    if not shipped or found != shipped:
        raise BuildError(f"the staged sparksync finds the shipped bundles {found}, not {shipped}")


def validate(root: Path) -> None:
    """The desktop entry and the AppStream file, with the distribution's own validators."""
    desktop = root / "usr/share/applications/sparksync.desktop"
    metainfo = root / f"usr/share/metainfo/{APP_ID}.metainfo.xml"
    for tool, cmd in (
        ("desktop-file-validate", ["desktop-file-validate", str(desktop)]),
        ("appstreamcli", ["appstreamcli", "validate", "--no-net", str(metainfo)]),
    ):
        if shutil.which(tool) is None:
            print(
                f"build_deb: {tool} is not installed; skipping that check (make system-deps installs it)",
                file=sys.stderr,
            )
            continue
        _run(cmd, what=tool)


def depends(root: Path) -> str:
    """The Depends line: dpkg-shlibdeps over every ELF file, private libraries excluded."""
    elves = [p for p in (root / APP_DIR).rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    private_dirs = sorted({str(p.parent) for p in elves})
    with tempfile.TemporaryDirectory() as tmp:
        # dpkg-shlibdeps insists on running in a source tree: give it a minimal one.
        (Path(tmp) / "debian").mkdir()
        (Path(tmp) / "debian" / "control").write_text(
            f"Source: {PACKAGE}\n\nPackage: {PACKAGE}\nArchitecture: any\n"
        )
        cmd = ["dpkg-shlibdeps", "-O", "--ignore-missing-info", "--warnings=0",
               *[f"-l{d}" for d in private_dirs], *map(str, elves)]  # fmt: skip
        out = _run(cmd, what="dpkg-shlibdeps", cwd=tmp)
    line = next((ln for ln in out.splitlines() if ln.startswith("shlibs:Depends=")), None)
    if line is None:
        raise BuildError(f"dpkg-shlibdeps printed no shlibs:Depends line:\n{out}")
    return line.split("=", 1)[1]


def write_control(root: Path, ver: str, arch: str, deps: str) -> None:
    size_kib = sum(p.lstat().st_size for p in root.rglob("*") if not p.is_dir()) // 1024 + 1
    control = (HERE / "control.in").read_text()
    for key, value in {
        "@VERSION@": ver,
        "@ARCH@": arch,
        "@INSTALLED_SIZE@": str(size_kib),
        "@DEPENDS@": deps,
    }.items():
        control = control.replace(key, value)
    (root / "DEBIAN").mkdir(exist_ok=True)
    _write(root / "DEBIAN" / "control", control)


def pack(root: Path, out: Path, level: int = 6) -> Path:
    """xz, the compression every dpkg reads and lintian accepts (zstd is neither)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(
        ["dpkg-deb", "--root-owner-group", "-Zxz", f"-z{level}", "--build", str(root), str(out)],
        what="dpkg-deb",
    )
    return out


def build(
    out_dir: Path, work: Path, app: Path | None = None, level: int = 6, bundle_cache: Path | None = None
) -> Path:
    """Every step, timed; returns the .deb's path."""
    ver, arch = version(), deb_arch()
    work.mkdir(parents=True, exist_ok=True)
    root = work / "root"
    # First, as it is the step that needs the package index: fail early without it.
    bundles = _timed("agent bundles", lambda: agent_bundles(bundle_cache or ROOT / "build" / "bundles"))
    app = app or _timed("PyInstaller", lambda: run_pyinstaller(work))
    _timed("stage", lambda: stage(app, root, ver, bundles))
    _timed("smoke", lambda: smoke(root, ver))
    _timed("validate", lambda: validate(root))
    deps = _timed("dpkg-shlibdeps", lambda: depends(root))
    write_control(root, ver, arch, deps)
    deb = _timed("dpkg-deb", lambda: pack(root, out_dir / deb_name(ver, arch), level))
    print(f"build_deb: {deb} ({deb.stat().st_size / 2**20:.0f} MiB)\nbuild_deb: Depends: {deps}")
    return deb


def agent_bundles(cache: Path) -> list[Path]:
    """The shipped agent bundles (agent_bundles.py), built or reused from ``cache``."""
    from agent_bundles import shipped_bundles
    from sparksync.core.bundle import BundleError

    try:
        return shipped_bundles(cache, lambda line: print(f"build_deb: {line}", flush=True))
    except BundleError as exc:
        raise BuildError(f"building the agent bundles the package ships failed: {exc}") from exc


# --- helpers ------------------------------------------------------------------


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _timed(name: str, step):
    start = time.monotonic()
    result = step()
    print(f"build_deb: {name} took {time.monotonic() - start:.0f} s", flush=True)
    return result


def _run(cmd: list[str], what: str | None = None, *, capture: bool = True, **kwargs) -> str:
    try:
        proc = subprocess.run(cmd, text=True, capture_output=capture, check=False, **kwargs)
    except FileNotFoundError:
        raise BuildError(f"{cmd[0]} is not installed; `make system-deps` (as root) installs it") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip() if capture else "see the output above"
        raise BuildError(f"{what or cmd[0]} failed with exit code {proc.returncode}: {detail}")
    return proc.stdout or ""


def _release_time() -> datetime.datetime:
    # SOURCE_DATE_EPOCH pins the dates for reproducible rebuilds (reproducible-builds.org).
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        return datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)


def _release_date() -> str:
    return _release_time().date().isoformat()


def _tidy_elves(app: Path) -> None:
    """Strip debug symbols and drop search paths into the build machine, as Debian's dh_strip would.

    A Python built outside the distribution (pyenv, for one) leaves a RUNPATH
    to its own prefix in libpython and every extension module; inside the
    bundle that path means nothing. $ORIGIN-relative paths (Qt's) stay.
    """
    for path in app.rglob("*"):
        if path.is_symlink() or not path.is_file() or not _is_elf(path) or _is_executable_program(path):
            continue  # the program itself carries its archive after the ELF image: strip would cut it off
        if path.parent.name.endswith(".libs"):
            continue  # auditwheel's vendored libraries: patchelf moved their segments, strip breaks them
        _run(["strip", "--strip-unneeded", "--remove-section=.comment", "--remove-section=.note", str(path)],
             what=f"strip {path.name}")  # fmt: skip
        runpath = _run(["patchelf", "--print-rpath", str(path)], what="patchelf").strip()
        kept = [entry for entry in runpath.split(":") if entry.startswith("$ORIGIN")] if runpath else []
        if runpath and kept != runpath.split(":"):
            cmd = (
                ["patchelf", "--set-rpath", ":".join(kept), str(path)]
                if kept
                else ["patchelf", "--remove-rpath", str(path)]
            )
            _run(cmd, what="patchelf")


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == b"\x7fELF"


def _is_executable_program(path: Path) -> bool:
    """The bundle's main program; libraries and extension modules are not executable (Debian policy)."""
    return path.name == PACKAGE and path.parent.name == PACKAGE


def _normalise_modes(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o755 if _is_executable_program(path) else 0o644)


def _link(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _gzip(data: bytes, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(dst, "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as gz,
    ):
        gz.write(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the SparkSync .deb")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "dist", help="where the .deb goes (default: dist/)"
    )
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "deb", help="scratch directory")
    parser.add_argument(
        "--app", type=Path, help="wrap this existing PyInstaller build instead of building one"
    )
    parser.add_argument(
        "--bundle-cache",
        type=Path,
        default=ROOT / "build" / "bundles",
        help="where the shipped agent bundles are kept between builds (default: build/bundles)",
    )
    parser.add_argument(
        "--compression-level",
        type=int,
        default=6,
        choices=range(10),
        metavar="0-9",
        help="xz level: 6 (default) for releases; 1 takes a quarter of the time for a 10%% larger file",
    )
    args = parser.parse_args(argv)
    try:
        build(
            args.out.resolve(),
            args.work.resolve(),
            args.app.resolve() if args.app else None,
            args.compression_level,
            args.bundle_cache.resolve(),
        )
    except BuildError as exc:
        print(f"build_deb: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
