.PHONY: run test lock bench clean

# PYTHON and VENV pick the interpreter and its environment (packaging/bootstrap.sh).
VENV ?= .venv
export PYTHON VENV

run:
	packaging/bootstrap.sh run
	$(VENV)/bin/lipsync-studio

test:
	packaging/bootstrap.sh test
	$(VENV)/bin/python -m pytest -q tests

# Re-resolve packaging/locks/ after a dependency change in pyproject.toml; UPGRADE=1 moves
# every package to its newest allowed release.
lock:
	packaging/bootstrap.sh test
	UV=$(VENV)/bin/uv packaging/lock.sh

bench:
	packaging/bootstrap.sh test
	$(VENV)/bin/python bench/av_sync.py

clean:
	rm -rf .venv .venv-* .pytest_cache
