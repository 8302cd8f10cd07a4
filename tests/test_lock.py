"""The lock files agree with pyproject.toml, and the environment under test was built from one.

`make lock` (packaging/lock.sh) writes packaging/locks/{run,dist,test}-pyX.Y.txt; bootstrap.sh
installs them with pip --require-hashes. These checks fail when a dependency is added,
removed or re-bounded in pyproject.toml without re-locking, so a stale lock cannot land.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "packaging" / "locks"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
# uv marks the packages pyproject.toml asks for with this origin. The build backend is fed
# to it on standard input (pyproject.toml's build-system table is no input uv resolves), and
# those pins carry no origin of their own.
PYPROJECT_ORIGIN = f"{PROJECT['name']} (pyproject.toml)"
BUILD = {canonicalize_name(Requirement(r).name) for r in PYPROJECT["build-system"]["requires"]}


@dataclass
class Pin:
    version: str
    hashes: list[str] = field(default_factory=list)
    via: set[str] = field(default_factory=set)


def read_lock(path: Path) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if not line[0].isspace() and not line.startswith("#"):
            m = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s\\;]+)\s*\\?", line)
            assert m, f"{path.name}: not an exact pin: {line!r}"
            current = pins.setdefault(canonicalize_name(m[1]), Pin(m[2]))
        elif current is not None and stripped.startswith("--hash=sha256:"):
            current.hashes.append(stripped.removeprefix("--hash=sha256:").rstrip(" \\"))
        elif current is not None and stripped.startswith("#"):
            origin = stripped.lstrip("#").strip().removeprefix("via").strip()
            if origin:
                current.via.add(origin)
    return pins


def lock_versions() -> list[str]:
    return sorted({p.stem.split("-py")[1] for p in LOCKS.glob("*-py*.txt")}, key=Version)


# The extras each lock holds besides the app's own dependencies (packaging/lock.sh).
EXTRAS = {"run": (), "dist": ("dist",), "test": ("dev", "dist")}


def direct_requirements(python: str, extras: tuple[str, ...]) -> dict[str, Requirement]:
    """The requirements pyproject.toml names, with those of `extras`, that apply on Linux
    x86-64 with `python`."""
    env = default_environment()
    env.update(python_version=python, python_full_version=f"{python}.0",
               sys_platform="linux", platform_system="Linux", platform_machine="x86_64")
    raw = list(PROJECT["dependencies"]) + list(PYPROJECT["build-system"]["requires"])
    for extra in extras:
        raw += PROJECT["optional-dependencies"][extra]
    reqs = [Requirement(r) for r in raw]
    return {canonicalize_name(r.name): r for r in reqs if r.marker is None or r.marker.evaluate(env)}


def test_there_are_the_locks_of_every_target_for_every_supported_python():
    """A lock per minor version that requires-python admits, and no lock for any other."""
    allowed = SpecifierSet(PROJECT["requires-python"])
    candidates = [f"3.{minor}" for minor in range(8, 20)]
    supported = [v for v in candidates if allowed.contains(f"{v}.0")]
    assert lock_versions() == supported
    for v in supported:
        assert all((LOCKS / f"{target}-py{v}.txt").is_file() for target in EXTRAS)


@pytest.mark.parametrize("python", lock_versions())
@pytest.mark.parametrize("target", list(EXTRAS))
def test_lock_pins_exactly_what_pyproject_asks_for(python, target):
    pins = read_lock(LOCKS / f"{target}-py{python}.txt")
    wanted = direct_requirements(python, EXTRAS[target])
    for name, req in wanted.items():
        assert name in pins, f"{target}-py{python}: {req} is not locked: run `make lock`"
        assert req.specifier.contains(pins[name].version, prereleases=True), (
            f"{target}-py{python}: {name}=={pins[name].version} is outside '{req}': run `make lock`")
    locked_direct = {n for n, p in pins.items() if PYPROJECT_ORIGIN in p.via} | BUILD
    assert locked_direct == set(wanted), (
        f"{target}-py{python}: the lock's direct requirements differ from pyproject.toml "
        f"(extra: {sorted(locked_direct - set(wanted))}, missing: {sorted(set(wanted) - locked_direct)}):"
        " run `make lock`")
    for name, pin in pins.items():
        assert pin.hashes, f"{target}-py{python}: {name} has no hash"
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in pin.hashes), name
        assert pin.via or name in BUILD, f"{target}-py{python}: {name} is locked but nothing needs it"


@pytest.mark.parametrize("python", lock_versions())
@pytest.mark.parametrize("target", ["run", "dist"])
def test_run_and_dist_locks_are_the_test_lock_less_the_test_tools(python, target):
    """Users run, and bundle, exactly the versions the suite ran on."""
    pins = read_lock(LOCKS / f"{target}-py{python}.txt")
    test = read_lock(LOCKS / f"test-py{python}.txt")
    for name, pin in pins.items():
        assert name in test and test[name].version == pin.version, name


def test_this_environment_was_installed_from_its_lock():
    """bootstrap.sh installed the test lock for this Python, at exactly its versions."""
    python = "%d.%d" % sys.version_info[:2]
    pins = read_lock(LOCKS / f"test-py{python}.txt")
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    wrong = {n: (p.version, installed.get(n)) for n, p in pins.items()
             if installed.get(n) != p.version}
    assert not wrong, f"installed versions differ from the lock (locked, installed): {wrong}"
