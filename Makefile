.PHONY: run test lock bench clean dist bundle appimage

# PYTHON and VENV pick the interpreter and its environment (packaging/bootstrap.sh).
VENV ?= .venv
export PYTHON VENV

run:
	packaging/bootstrap.sh run
	$(VENV)/bin/lipsync-studio

test:
	packaging/bootstrap.sh test
	$(VENV)/bin/python -m pytest -q tests

# The one-folder app, dist/lipsync-studio/lipsync-studio, and the AppImage around it,
# dist/LipsyncStudio-x86_64.AppImage (docs/packaging.md): installs what building them
# needs, then builds them from nothing (no cache of an earlier build is used).
dist:
	packaging/bootstrap.sh dist
	$(MAKE) bundle
	$(MAKE) appimage

# The build alone, with $(VENV) as it is; DIST_DIR and DIST_WORK place the app and
# PyInstaller's work files (tests/test_dist.py builds into a folder of its own).
DIST_DIR ?= dist
DIST_WORK ?= build/pyinstaller
bundle:
	$(VENV)/bin/python -m PyInstaller --noconfirm --clean --log-level WARN \
		--distpath "$(DIST_DIR)" --workpath "$(DIST_WORK)" packaging/lipsync-studio.spec

# The AppImage alone, around the folder APP_DIR as it is.
APP_DIR ?= $(DIST_DIR)/lipsync-studio
APPIMAGE ?= $(DIST_DIR)/LipsyncStudio-x86_64.AppImage
appimage:
	packaging/appimage/build.sh "$(APP_DIR)" "$(APPIMAGE)"

# Re-resolve packaging/locks/ after a dependency change in pyproject.toml; UPGRADE=1 moves
# every package to its newest allowed release.
lock:
	packaging/bootstrap.sh test
	UV=$(VENV)/bin/uv packaging/lock.sh

bench:
	packaging/bootstrap.sh test
	$(VENV)/bin/python bench/av_sync.py

clean:
	rm -rf .venv .venv-* .pytest_cache dist build
