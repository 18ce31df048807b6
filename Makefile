# Two commands a user needs: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed-stamp
SHARED_DATA := $(abspath ../shared/data)
# Tests and notebooks use the offline datasets beside the checkout when they exist.
DATA_ENV = $(if $(wildcard $(SHARED_DATA)),SAT_TUTORIAL_DATA=$${SAT_TUTORIAL_DATA:-$(SHARED_DATA)},)
# Two pytest workers on two cores: one BLAS thread each. With more threads a worker
# (make test TEST_ENV='... OMP_NUM_THREADS=2'), fewer workers: two workers of two threads
# on two cores ran the slowest notebook cells over nbval's 600-second limit.
TEST_ENV = $(DATA_ENV) MPLBACKEND=Agg OMP_NUM_THREADS=1 PYTHONHASHSEED=0
TEST_THREADS = $(or $(patsubst OMP_NUM_THREADS=%,%,$(filter OMP_NUM_THREADS=%,$(TEST_ENV))),1)
JOBS ?= $(shell expr 2 / $(TEST_THREADS) \| 1)

.PHONY: demo test install sandbox lab export clean-nbs bench help docs docs-check notebooks assignments grade weights

help:
	@echo "make demo   - install into $(VENV) and run the demo (sat-tutorial demo --out demo_out)"
	@echo "make test   - install into $(VENV), run tests/ and every notebook (nbval)"
	@echo "make lab    - open the notebooks in JupyterLab"
	@echo "make export - nbdev_export + nbdev_clean after editing notebooks"
	@echo "make notebooks - execute the notebooks whose stored outputs are not current, one after"
	@echo "                 another, and store their outputs (NB='02 14' for some, ALL=1 for all)"
	@echo "make weights - retrain the model zoo (sat_tutorial/zoo/) one model after another, NAME=soft-scenes for one"
	@echo "make docs   - build the book (every notebook executed, API, options, results) into _docs/"
	@echo "make docs-check - open every page of _docs/ in headless Chromium; screenshots in _docs/_screens/"
	@echo "make assignments - write the student versions of the course kit to assignments/release/"
	@echo "make grade  - autograde assignments/submitted/<student>/<assignment>/ into assignments/grades.csv"

$(STAMP): settings.ini setup.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,course]" 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import sat_tutorial, torch, nbdev, nbval, nbgrader" || { echo "installation into $(VENV) failed"; exit 1; }
	@$(MAKE) -s sandbox
	@touch $(STAMP)

# The course kit grades each submission inside bubblewrap (assignments/README.md). As root
# with apt-get it is installed here; otherwise the grading tests skip and say why.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && { apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 \
	  && apt-get install -y -qq bubblewrap >/dev/null 2>&1; }; }; } \
	  || echo "note: bubblewrap (bwrap) is missing, so the course kit's grading tests will be skipped: apt-get install bubblewrap"

install: $(STAMP)

# The book: the docs extra (Sphinx, myst-nb, theme, Playwright) once, and MathJax 3 from npm (math offline).
DOCS_STAMP = $(VENV)/.docs-stamp
MATHJAX    = .docs_build/npm/node_modules/mathjax/es5/tex-svg-full.js

$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q --disable-pip-version-check -e ".[dev,docs]" 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import sphinx, myst_nb, sphinx_book_theme, playwright" || { echo "installing .[docs] into $(VENV) failed"; exit 1; }
	@touch $(DOCS_STAMP)

$(MATHJAX):
	@command -v npm >/dev/null 2>&1 || { echo "make docs: npm is needed once, to fetch MathJax 3 (apt-get install npm)"; exit 1; }
	npm install --silent --no-audit --no-fund --prefix .docs_build/npm mathjax@3

docs: $(DOCS_STAMP) $(MATHJAX)
	$(PY) docs/build.py

docs-check: $(DOCS_STAMP)
	$(PY) docs/check.py --install-browser

demo: $(STAMP)
	$(VENV)/bin/sat-tutorial demo --out demo_out

test: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest -n $(JOBS) --dist loadfile tests nbs \
	  --nbval-lax --nbval-current-env --nbval-cell-timeout=600 -p no:cacheprovider -q

lab: $(STAMP)
	$(DATA_ENV) $(VENV)/bin/jupyter lab nbs

# Stored outputs: figures visible on GitHub, in JupyterLab and in the book before running.
notebooks: $(STAMP)
	$(DATA_ENV) $(PY) tools/notebooks.py run $(if $(ALL),--all,) $(NB)

export: $(STAMP)
	$(VENV)/bin/nbdev_export && $(VENV)/bin/nbdev_clean

# The model zoo: every model trained by its `sat-tutorial` command, packed, entered in
# sat_tutorial/zoo/manifest.json (tools/zoo.py). Retrain one only when its code changed.
weights: $(STAMP)
	$(DATA_ENV) $(PY) tools/zoo.py build $(NAME)

bench: $(STAMP)
	$(DATA_ENV) $(PY) bench/run_all.py

# The course kit runs in the environment the instructor installed it into
# (assignments/README.md): nothing is installed here.
# The course kit (assignments/README.md): ARGS passes options, as in
# make grade ARGS="a2_hard_attention --student alice --timeout 60 --jobs 2"
assignments:
	$(PYTHON) assignments/course.py release $(ARGS)

grade:
	$(DATA_ENV) MPLBACKEND=Agg $(PYTHON) assignments/course.py grade $(ARGS)
