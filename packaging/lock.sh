#!/usr/bin/env bash
# Re-resolves the lock files from pyproject.toml (`make lock`). Run it after changing any
# dependency in pyproject.toml; tests/test_lock.py fails until you do. Versions already in
# a lock are kept where pyproject.toml still allows them; `make lock UPGRADE=1` moves every
# package to its newest allowed release (then run the suite on each Python before committing).
#
# The locks are hashed requirements files, one per Python version the README supports,
# installed by pip with --require-hashes (packaging/bootstrap.sh). We resolve per version
# rather than one universal file because a universal resolution must pick versions that
# also satisfy the oldest Python's constraints for every newer one; per version, each gets
# what its own suite was run on. The platform is x86-64 glibc >= 2.34 (Debian 12, Ubuntu
# 22.04 and newer): PySide6 6.10+ ships only manylinux_2_34 wheels, and an older target
# would hold every user back at PySide6 6.9. uv does the resolving (fast, hashes for every
# wheel of a release); pip does the installing, so the machine's own pip configuration
# applies.
set -euo pipefail
cd "$(dirname "$0")/.."
uv=${UV:-.venv/bin/uv}
# The target Python need not be installed here: uv resolves for it from wheel metadata.
export UV_PYTHON_DOWNLOADS=never
[ -x "$uv" ] || { echo "make lock needs uv: run 'make test' first (it installs uv into .venv)"; exit 1; }

mkdir -p packaging/locks
for py in 3.11 3.12 3.13; do
  common=(${UPGRADE:+--upgrade} --python-version "$py" --python-platform x86_64-manylinux_2_34 --generate-hashes --quiet
    --custom-compile-command "make lock")
  # setuptools is the build backend: locked too, so the project itself is built without
  # fetching anything unpinned (bootstrap.sh installs it with --no-build-isolation).
  # The tests build the one-folder app too (tests/test_dist.py): PyInstaller is in it.
  echo "setuptools>=68" | "$uv" pip compile pyproject.toml - --extra dev --extra dist "${common[@]}" \
    -o "packaging/locks/test-py$py.txt"
  # What `make run` installs is the test lock less the test tools, at the same versions:
  # users run exactly what the suite ran on.
  echo "setuptools>=68" | "$uv" pip compile pyproject.toml - "${common[@]}" \
    --constraint "packaging/locks/test-py$py.txt" -o "packaging/locks/run-py$py.txt"
  # What `make dist` installs: the run lock plus PyInstaller, at the test lock's versions.
  echo "setuptools>=68" | "$uv" pip compile pyproject.toml - --extra dist "${common[@]}" \
    --constraint "packaging/locks/test-py$py.txt" -o "packaging/locks/dist-py$py.txt"
  # What `make run` installs on a machine with an NVIDIA GPU: the run lock plus the gpu
  # extra, at the run lock's versions (and cuda-bindings at the one the tests run).
  echo "setuptools>=68" | "$uv" pip compile pyproject.toml - --extra gpu "${common[@]}" \
    --constraint "packaging/locks/run-py$py.txt" --constraint "packaging/locks/test-py$py.txt" \
    -o "packaging/locks/gpu-py$py.txt"
done
echo "Locks written to packaging/locks/; commit them with the pyproject.toml change."
