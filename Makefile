# Two entry points for a fresh machine: `make demo` and `make test` (each sets up .venv first).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
COMPILED := $(VENV)/.compiled

.PHONY: demo test check setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile -e ".[test]"
	touch $(STAMP)

# The venv byte-compiled on every core at once (pip compiles its tens of thousands of modules one
# after another), the packages' own test suites left out (programs do not import them); a module
# that does not compile is left to Python, as pip leaves it. The tests do without: their session
# keeps the bytecode its processes compile (tests/conftest.py).
$(COMPILED): $(STAMP)
	$(BIN)/python -c "import compileall, re, sysconfig; compileall.compile_dir(sysconfig.get_paths()['purelib'], \
	  quiet=2, workers=0, rx=re.compile(r'/(tests|testing/_internal)/'))"
	touch $(COMPILED)

setup: $(COMPILED)

demo: $(COMPILED)
	$(BIN)/python examples/demo.py

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope

# The developer's quick loop: lint, types, and the tests that need neither Ray, nor a cluster,
# nor PostgreSQL (markers set in tests/conftest.py); `make test` runs everything.
# mypy runs beside the tests (most of them wait on one core).
check: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m mypy > .mypy.out 2>&1 & mypy=$$!; \
	$(BIN)/python -m pytest -q -m "not slow and not cluster and not postgres"; tests=$$?; \
	wait $$mypy; types=$$?; cat .mypy.out; rm -f .mypy.out; \
	test $$tests -eq 0 && test $$types -eq 0

clean:
	rm -rf $(VENV) results
