# Two entry points (the README's quick start):
#   make run    set up, then run the main job
#   make test   set up, then lint and run the test suite (what .ci/run does)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test setup lint clean browser

# --no-compile: pip would byte-compile every installed module (34 CPU s, one core, most of it dask,
# distributed, matplotlib and pandas that no run imports whole); Python compiles what is imported, once.
$(STAMP): pyproject.toml requirements-cuda.txt CMakeLists.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile --upgrade pip
	$(BIN)/python -m pip install -q --no-compile --no-deps -r requirements-cuda.txt
	$(BIN)/python -m pip install -q --no-compile -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

# With a GPU: generate, build and run the benchmarks, then analyze; without one:
# analyze with the shipped H100 database (perfdb/) and profile bundles.
run: setup
	$(BIN)/benanza models zoo models/zoo
	$(BIN)/benanza layers models/zoo
	$(BIN)/benanza quickstart models/zoo --out out

lint: setup
	$(BIN)/ruff check .

# The HTML report test renders pages in headless Chromium: install it quietly where apt-get
# exists (a clean CI machine); elsewhere that one test skips and says why.
browser:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	  { SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	    ($$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium) \
	      >/dev/null 2>&1 || echo "note: could not install chromium; the headless-browser test will skip"; }

# Two groups, run at once: everything but the nvcc builds, on two processes (pytest-xdist; a module's
# tests stay together, so its fixtures are built once), and the GPU-free compile tests (marked `compile`:
# one generated project covering every template, built once against the real headers). One after the
# other left cores idle: the compile group's single-threaded steps (collection, generation, the long
# cudnn-frontend unit at the end of its Ninja run) and the first group's last minutes on one worker.
# The compile group's report (in $(COMPILE_LOG)) is printed after the first group's; either failing fails.
# bench/ci_time.py times the same steps. Tests never import bench/: the bench scripts' own pieces that run
# without a GPU are checked by their self-checks (under a second each).
COMPILE_LOG := $(VENV)/compile-group.log
test: lint browser
	$(BIN)/python -m pytest -m compile -p no:cacheprovider >$(COMPILE_LOG) 2>&1 & compile=$$!; \
	  $(BIN)/python -m pytest -m "not compile" -n 2 --dist loadfile; first=$$?; \
	  wait $$compile; second=$$?; echo "--- the compile group (pytest -m compile):"; cat $(COMPILE_LOG); \
	  [ $$first -eq 0 ] && [ $$second -eq 0 ]
	$(BIN)/python bench/close_loop.py --self-check
	$(BIN)/python bench/validate.py self-check

clean:
	rm -rf $(VENV) build
