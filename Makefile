# The README's quickstart: `make quickstart` (the main job) and `make test` (the test suite).
# Both create and fill .venv on first use (scripts/bootstrap.sh); nothing is installed by hand.
VENV ?= .venv
STAMP := $(VENV)/.mtrl-bootstrap
BOOTSTRAP_INPUTS := pyproject.toml scripts/bootstrap.sh $(wildcard plugins_contrib/*/pyproject.toml)

.PHONY: quickstart test lint bootstrap test-busy docs

$(STAMP): $(BOOTSTRAP_INPUTS)
	MTRL_VENV=$(VENV) bash scripts/bootstrap.sh
	touch $(STAMP)

bootstrap: $(STAMP)

quickstart: $(STAMP)
	$(VENV)/bin/mtrl train configs/quickstart.yaml

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q

# The tests (or TESTS=tests/ray ...) beside 2 CPU-bound processes: a test racing start-up
# against a fixed budget fails here (scripts/busy.py always stops the busy processes).
TESTS ?=
test-busy: $(STAMP)
	$(VENV)/bin/python scripts/busy.py --hogs 2 -q $(TESTS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml) into site/, strict: a broken link or anchor fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict
