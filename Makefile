# Two commands work on a fresh machine: `make run` and `make test`. Set-up is idempotent:
# the venv is rebuilt only when pyproject.toml changes, system packages only when missing.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
EXTRAS := dgl,pyg,views,lab,test,docs
PORT ?= 5006
export TQDM_MININTERVAL ?= 2

.PHONY: setup system run test test-newer test-fast lab bench notebooks docs docs-data docs-data-quick docs-data-full clean help

help:
	@echo "make run    - serve the dashboard with a live demo run (http://127.0.0.1:$(PORT))"
	@echo "make test   - the whole suite: unit tests, notebooks (nbval), browser tests and the docs build"
	@echo "make test-newer - the unit tests and doctests on the newest torch, numpy and pandas pip finds, without DGL"
	@echo "make lab    - JupyterLab on notebooks/ (http://127.0.0.1:8888, the URL with its token is printed)"
	@echo "make notebooks - re-run the notebooks in quick mode and save their outputs (what make test compares)"
	@echo "make bench  - benchmarks (partition, full-graph training)"
	@echo "make docs   - the documentation, offline, into docs/_build/html (warnings are errors)"
	@echo "make docs-data - re-run the reproduction of the seven systems (full and quick) for the docs and notebooks"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade "pip<25" wheel 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
	$(PY) -m pip install -q -e ".[$(EXTRAS)]" 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
	@touch $(STAMP)

# Debian packages: chromium for the browser tests, libmetis5 for multi-constraint METIS.
system:
	@if ! command -v chromium >/dev/null || ! /sbin/ldconfig -p | grep -q libmetis.so; then \
	  echo "installing system packages: chromium libmetis5"; \
	  (apt-get update -q && apt-get install -y -q chromium libmetis5) >/dev/null || \
	  echo "warning: could not install chromium/libmetis5 (browser tests and multi-constraint METIS will be skipped)"; \
	fi

setup: $(STAMP) system

run: setup
	$(VENV)/bin/workbench serve --port $(PORT) --demo

# tests/ includes tests/ui/test_docs.py: the docs built as `make docs` builds them (-W), then opened in chromium.
# TEST_WORKERS pytest-xdist workers (tests/conftest.py groups the browser tests and the emulated hosts; 0: one
# process, as before). The notebooks stay in one process: nbval with two workers saved 9 s of 92.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS))
test: setup
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(PY) -m pytest tests -q $(XDIST) $(if $(XDIST),--dist loadgroup) --durations=15
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(PY) -m pytest -q --doctest-modules workbench widgets recipes reproduce
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(PY) -m pytest -q $(NBVAL) notebooks

# The core on a newer stack without DGL, as the GPU machines have it (torch 2.11 and later, numpy 2, pandas 3): a
# second venv with the newest torch pip finds (TORCH_SPEC picks one; PIP_EXTRA adds an index, e.g.
# PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu" for the CPU build), every extra but `dgl`, then
# the unit tests and doctests (the browser, docs and notebook tests need the default environment). Not part of
# `make test`: CI has no second torch to spare the time for. It found, on torch 2.13 / numpy 2.4 / pandas 3.1, a dgl
# sampler refused only on the rank, a 10 s name lookup in every emulated rendezvous and a view pandas 3 broke.
NEWER := .venv-newer
TORCH_SPEC ?= torch>2.2.1
test-newer:
	@test -x $(NEWER)/bin/python || $(PYTHON) -m venv $(NEWER)
	$(NEWER)/bin/python -m pip install -q --upgrade "pip<25" wheel 2>&1 | { grep -v "^WARNING: Location 'file:" || true; }
	$(NEWER)/bin/python -m pip install -q $(PIP_EXTRA) "$(TORCH_SPEC)" "numpy>=2" -e ".[pyg,views,test]" 2>&1 | \
	  { grep -v "^WARNING: Location 'file:" || true; }
	@$(NEWER)/bin/python -c "import torch, numpy, pandas; print('torch', torch.__version__, 'numpy', numpy.__version__, \
	  'pandas', pandas.__version__)"
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(NEWER)/bin/python -m pytest tests -q -p no:cacheprovider --ignore=tests/ui \
	  --ignore=tests/docs --ignore=tests/test_notebooks.py
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(NEWER)/bin/python -m pytest -q -p no:cacheprovider --doctest-modules \
	  workbench widgets recipes reproduce

# The notebooks are committed with the outputs of a quick-mode run, and `make test` compares every cell's output
# with them (nbval; notebooks/nbval_sanitize.cfg lists what may differ: wall times, run ids, temporary paths...).
# After a change that deliberately changes what a notebook shows, `make notebooks` re-runs and re-saves them
# (notebooks/_strip.py then drops widget state, JavaScript loaders and Bokeh documents); commit the result.
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg --nbval-cell-timeout=600
notebooks: setup
	TQDM_DISABLE=1 WORKBENCH_QUICK=1 $(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace \
	  --ExecutePreprocessor.timeout=600 notebooks/*.ipynb
	$(PY) notebooks/_strip.py notebooks/*.ipynb

# JupyterLab on 127.0.0.1, no browser; jupyter prints the URL with its token ("http://127.0.0.1:8888/lab?token=...").
# Containers and CI run as root, which jupyter refuses without --allow-root.
LAB_PORT ?= 8888
lab: setup
	@echo "JupyterLab on notebooks/: open the http://127.0.0.1:$(LAB_PORT)/lab?token=... URL it prints below"
	$(VENV)/bin/jupyter lab --no-browser --ServerApp.ip=127.0.0.1 --ServerApp.port=$(LAB_PORT) \
	  --ServerApp.root_dir=notebooks $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# The documentation: Sphinx, offline, warnings as errors (tests/ui/test_docs.py builds it the same way in
# `make test` and opens it in chromium). Its inputs are the code, the committed notebooks and docs/reproduce/*.json;
# -E reads every page again, since the generated pages (CLI, stages, API) follow the code, not their sources.
# The notebooks' live views are drawn by running each notebook once in quick mode (about 100 s for all on two
# cores; docs/_ext/wbdocs_views.py), kept in docs/_build/views-cache until the code or a notebook changes.
docs: setup
	TQDM_DISABLE=1 $(VENV)/bin/sphinx-build -b html -E -W --keep-going -q docs docs/_build/html
	@echo "docs: open docs/_build/html/index.html"

# The Systems pages' reproduction tables, kept under docs/ so a docs build runs no training: the full run
# (`workbench reproduce --json`, docs/reproduce/full.json: about 2 minutes on two cores), which the pages and the system
# notebooks show (reproduce.report.claims_table), and the quick one (`--quick`, docs/reproduce/quick.json:
# about 45 s), folded below it. Each carries its date and machine; commit both. `make docs-data-quick` or
# `make docs-data-full` refreshes one; after the full one, `make notebooks` re-saves the tables the notebooks show.
docs-data: docs-data-quick docs-data-full

docs-data-quick docs-data-full: docs-data-%: setup
	TQDM_DISABLE=1 $(VENV)/bin/workbench reproduce $(if $(filter quick,$*),--quick )--json > docs/reproduce/$*.json.tmp
	$(PY) -m json.tool --indent 1 docs/reproduce/$*.json.tmp > docs/reproduce/$*.json
	rm -f docs/reproduce/$*.json.tmp

bench: setup
	$(PY) benchmarks/partition.py
	$(PY) benchmarks/full_graph.py

clean:
	rm -rf $(VENV) runs .pytest_cache docs/_build
