# The two fresh-machine commands (see README): `make wheel` and `make test`.
PYTHON ?= python3
PIP := $(PYTHON) -m pip

.PHONY: wheel test sanitize deps test-deps install prebuilt sdist clean

## Main job: the full prebuilt set compiled for the default target and verified, packed into dist/: a
## manylinux abi3 wheel and an sdist carrying the same prebuilt set.
wheel: deps install prebuilt
	rm -rf build dist
	$(PIP) wheel --no-deps --no-build-isolation -w dist .
	$(PYTHON) -m tools.tag_wheel dist
	$(PYTHON) -m build --sdist --no-isolation --outdir dist .
	@ls -l dist

## Test suite: builds the prebuilt set (cached after the first time) and runs pytest.
test: test-deps install prebuilt
	$(PYTHON) -m pytest

## The sanitizer's clean bill for everything shipped: the families' test suites and selftests on the
## emulator under FLYAOT_EMU_SANITIZE=1 (docs/emulator.md#sanitizer; the timing-model tests are left out:
## sanitized launches are not timed); slow, so not part of `make test`.
sanitize: test-deps install prebuilt
	FLYAOT_EMU_SANITIZE=1 FLYAOT_DEVICE=emu $(PYTHON) -m pytest tests/kernels tests/emu/test_sanitizer.py \
	    --ignore=tests/kernels/test_modeled.py
	FLYAOT_DEVICE=emu $(PYTHON) -m flyaot selftest --sanitize

deps:
	$(PIP) install -r requirements/build.txt

test-deps:
	$(PIP) install -r requirements/test.txt

install:
	$(PIP) install --no-deps --no-build-isolation -e .

prebuilt:
	$(PYTHON) -m flyaot.build_tools build
	$(PYTHON) -m flyaot.build_tools verify

clean:
	rm -rf build dist *.egg-info prebuilt/manifest.json $(filter-out prebuilt/__pycache__/,$(wildcard prebuilt/*/))
