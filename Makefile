# Two entry points (the README's quick start):
#   make run    set up, then run the main job
#   make test   set up, then lint and run the test suite (what .ci/run does)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test setup lint clean browser

# The venv gets the newest pip from the pip that makes it (`pip --python`, pip >= 22.3), not first the one Python
# bundles, byte-compiled and then replaced (3 s instead of 10; ensurepip where that pip is missing or older).
# The CUDA wheels (1.3 GB to unpack: mostly I/O) install beside the package and its dependencies (mostly CPU,
# the native build among it): no package is in both, and together they take 36 s wall instead of 20 + 36.
# pip byte-compiles what it installs on one core (34 CPU s for this .venv); compileall does the same on every
# core (18.6 s wall on 2; the set-up 90 -> 80 s wall, measured step by step). The .pyc files must be there:
# where PYTHONDONTWRITEBYTECODE is set (as on the machine CI was measured on) Python never writes the ones it
# compiles on import, so every test process and every `python -m benanza` child compiled numpy, onnx and the
# rest again (without them a fresh-clone CI took 925 CPU s, with them 897: docs/RESULTS.md §16). Not compiled:
# the packages' own test suites and cudnn-frontend's Python kernels (`cudnn/`, installed for its headers), half
# the .venv's Python source and nothing benanza or its tests import (23 -> 13 s wall).
$(STAMP): pyproject.toml requirements-cuda.txt CMakeLists.txt
	$(PYTHON) -m venv --without-pip $(VENV)
	$(PYTHON) -m pip --python $(BIN)/python install -q --no-compile --upgrade pip 2>/dev/null || \
	  { $(BIN)/python -m ensurepip && $(BIN)/python -m pip install -q --no-compile --upgrade pip; }
	$(BIN)/python -m pip install -q --no-compile --no-deps -r requirements-cuda.txt & cuda=$$!; \
	  $(BIN)/python -m pip install -q --no-compile -e '.[test]'; package=$$?; wait $$cuda && [ $$package = 0 ]
	$(BIN)/python -m compileall -q -j 0 -x '/site-packages/cudnn/|/tests?/' $(VENV)/lib
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

# Two groups: everything but the nvcc builds, then the GPU-free compile tests (marked `compile`:
# one generated project covering every template, built once against the real headers).
# The first group runs on two processes (pytest-xdist; a module's tests stay together, so its
# fixtures are built once); the build of the second already uses every core. (Run at once, the two
# took longer on 2 cores: 8 min 18 s against 7 min 42 s one after the other, 1 001 CPU s against 864: docs/RESULTS.md §16.)
# bench/ci_time.py times the same steps. Tests never import bench/: the bench scripts' own pieces that run
# without a GPU are checked by their self-checks (under a second each).
# The tests run with .pyc writing on (PYTHONDONTWRITEBYTECODE emptied, where the machine sets it): the first
# process to import a module of the checkout (benanza/, tests/) writes its .pyc and pytest its rewritten test
# modules, so the tests' `python -m benanza` children and the second group's collection do not compile them
# again (collecting every test module: 11.6 -> 5.3 CPU s; docs/RESULTS.md §16).
test: lint browser
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not compile" -n 2 --dist loadfile
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m compile
	$(BIN)/python bench/close_loop.py --self-check
	$(BIN)/python bench/validate.py self-check

clean:
	rm -rf $(VENV) build
