.PHONY: run test bench clean

run:
	packaging/bootstrap.sh run
	.venv/bin/lipsync-studio

test:
	packaging/bootstrap.sh test
	.venv/bin/python -m pytest -q tests

bench:
	packaging/bootstrap.sh test
	.venv/bin/python bench/av_sync.py

clean:
	rm -rf .venv .pytest_cache
