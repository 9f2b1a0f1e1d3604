# mplab: one command sets up, one tests, one runs the main job.
SHELL := /bin/bash
SCENARIO ?= quick
# Parallel emulated testbeds for `make experiment` (README: Campaigns beyond one testbed); more than the
# machine sustains (cores / 1) is refused with the reason. TESTBEDS=1 for a lab inventory.
TESTBEDS ?= 2
UV ?= uv
export UV_PYTHON_DOWNLOADS := never
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# `make setup-lab` leaves this marker: `uv run` must then not add the dev tools back
# (it installs the default dependency group, `dev`, into the environment it runs in).
LAB_MARKER := .venv/mplab-no-training-stack
UV_RUN = $(UV) run --frozen $(if $(wildcard $(LAB_MARKER)),--no-dev)

# Every program mplab calls comes from one of these; harness/tools.py says which program needs which
# package, and tests/test_tools.py checks this list against it (and against every argv in the code).
APT_PACKAGES := iperf3 mptcpize iproute2 nftables ethtool procps kmod git \
                clang llvm libbpf-dev bpftool \
                openssh-server openssh-client ser2net python3 python3-pip iputils-ping chromium \
                openvswitch-common openvswitch-switch hostapd wpasupplicant tcpdump

# The newest campaign of $(SCENARIO) (ids end in a sortable time stamp), its dataset and model.
# Campaign ids are <scenario>-<UTC time>: the digit keeps runs/quick-* from matching quick-physics or quick-setup2.
CAMPAIGN ?= $(lastword $(sort $(wildcard runs/$(SCENARIO)-[0-9]*)))
# The campaign before it (make rerun-report).
PREVIOUS ?= $(lastword $(filter-out $(CAMPAIGN),$(sort $(wildcard runs/$(SCENARIO)-[0-9]*))))
DATASET ?= datasets/$(SCENARIO)
MODEL ?= models/$(SCENARIO)
REPORT ?= reports/$(SCENARIO)
MLFLOW_PORT ?= 5000

.PHONY: wheel print-shipped-bpf reference delayline docs
.PHONY: rerun-report setup2 setup2-model setup setup-lab python-lab apt apt-packages doctor python bpf lint test test-unit experiment dataset train report mlflow-ui clean-testbed clean help lte-up lte-down lte-status lte-check wifi-up

help:
	@echo "make setup          install system packages (apt), the Python environment (uv) and the BPF congestion controls"
	@echo "make setup-lab      the same without the training stack (PyTorch, MLflow, scikit-learn: ~5 GB) for sweep-only machines"
	@echo "make doctor         check this machine: programs, kernel features, Python packages (make setup ends with it)"
	@echo "make bpf            build the BPF congestion controls (harness/cc/bpf -> harness/cc/bpf/build)"
	@echo "make test           the linter (make lint: ruff), then the whole test suite (namespace tests need root)"
	@echo "make experiment     run scenarios/\$$(SCENARIO).yaml on the inventory it names (default: quick, on the calibrated paper-lab; SCENARIO=quick-physics: the physics power profile)"
	@echo "make rerun-report   the two newest runs/\$$(SCENARIO)-* campaigns side by side: drift beyond noise, manifest differences (\$$(REPORT)-rerun)"
	@echo "make setup2         Setup II from nothing: training sweep, dataset, model (models/quick-setup2), controller comparison"
	@echo "make dataset        build \$$(DATASET) from the newest runs/\$$(SCENARIO)-* campaign (or CAMPAIGN=...); an existing one is kept as \$$(DATASET).<UTC time>"
	@echo "make train          train and export \$$(MODEL) from \$$(DATASET), tracked in MLflow (mlflow.db); an existing model is kept as \$$(MODEL).<UTC time>"
	@echo "make report         figures, Tables 2-3 beside the paper and index.html in \$$(REPORT) from the newest campaign"
	@echo "                    (with \$$(DATASET) and \$$(MODEL) when they exist)"
	@echo "make mlflow-ui      serve the MLflow UI on http://127.0.0.1:\$$(MLFLOW_PORT) (one worker; it takes 15-60 s to answer)"
	@echo "make clean-testbed  remove namespaces, processes and state an interrupted run left behind"
	@echo "make lte-up INVENTORY=inventory/<lab>.yaml [SECRETS=<file>]   configure and start the LTE cell"
	@echo "make lte-down INVENTORY=...   stop it;  make lte-status / lte-check INVENTORY=...   inspect it"
	@echo "make wifi-up INVENTORY=... [SECRETS=<file>]   configure the APs and receivers' WiFi, check association"
	@echo "make docs           build the user guide (mkdocs.yml, docs/) into site/ with --strict: a broken link or a page left out fails"

setup: apt python
	$(MAKE) bpf
	$(MAKE) --no-print-directory delayline
	$(MAKE) --no-print-directory doctor

# The set-up's self-check: every program (with versions), the kernel features, the Python packages.
# Exits non-zero with the fix when something essential is missing.
doctor:
	$(UV_RUN) mplab doctor

apt-packages:
	@echo $(APT_PACKAGES)

# A machine that only runs sweeps: no PyTorch/MLflow/scikit-learn (the `train` dependency group).
setup-lab: apt python-lab
	$(MAKE) bpf
	$(MAKE) --no-print-directory delayline
	$(MAKE) --no-print-directory doctor

# BPF struct_ops congestion controls (lia, olia, balia, wvegas; vegas, the bench's single-path competitor) and the arithmetic checker.
# vmlinux.h comes from the running kernel's BTF (CO-RE: the objects load on other kernels too).
# Without BTF or clang this prints why and leaves the objects absent: a scenario that names a
# coupled algorithm is then refused at preflight with the same reason, never silently replaced.
BPF_DIR := harness/cc/bpf
BPF_BUILD := $(BPF_DIR)/build
# What the wheel ships (hatch_build.py asks `make print-shipped-bpf`); vegas and calc are the benches' alone.
SHIPPED_BPF := lia olia balia wvegas timers cubic
BPF_OBJS := $(patsubst %,$(BPF_BUILD)/%.bpf.o,$(SHIPPED_BPF) vegas calc)
# -fdebug-prefix-map: the objects carry no checkout path, so the same source gives the same object (and the same
# digest in records' cc_impl) in any clone.
BPF_CFLAGS := -target bpf -O2 -g -mcpu=v3 -Wall -Wno-unused-variable -fdebug-prefix-map=$(CURDIR)=.

bpf:
	@if [ ! -r /sys/kernel/btf/vmlinux ]; then \
	  echo "bpf: skipped: this kernel has no BTF (/sys/kernel/btf/vmlinux); coupled CCs need CONFIG_DEBUG_INFO_BTF=y"; \
	elif ! command -v clang >/dev/null || ! command -v bpftool >/dev/null; then \
	  echo "bpf: skipped: clang or bpftool missing (apt install clang llvm libbpf-dev bpftool)"; \
	else $(MAKE) --no-print-directory $(BPF_OBJS); fi

$(BPF_BUILD)/vmlinux.h:
	mkdir -p $(BPF_BUILD)
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > $@.tmp
	mv $@.tmp $@

$(BPF_BUILD)/%.bpf.o: $(BPF_DIR)/%.bpf.c $(BPF_DIR)/mplab_cc.h $(BPF_DIR)/mplab_math.h $(BPF_BUILD)/vmlinux.h
	clang $(BPF_CFLAGS) -I$(BPF_BUILD) -c $< -o $@.tmp
	mv $@.tmp $@

# The emulated testbed's delay line as a compiled program (harness/emulation/delayline.c); without it the
# testbed runs the Python one (harness/emulation/delayline.py), which costs more CPU per emulated GB.
DELAYLINE_BIN := harness/emulation/build/mplab-delayline
delayline: $(DELAYLINE_BIN)
$(DELAYLINE_BIN): harness/emulation/delayline.c
	mkdir -p $(dir $@)
	clang -O2 -Wall -Wextra -o $@.tmp $< && mv $@.tmp $@

print-shipped-bpf:
	@echo $(SHIPPED_BPF)

# The installable tool: dist/mplab-<version>-py3-none-any.whl, with its data, the example workspace and the
# shipped BPF objects (built here by hatch_build.py: the wheel needs no compiler where it is installed).
wheel:
	rm -rf dist
	$(UV) build --wheel --out-dir dist

apt:
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PACKAGES)

# --compile-bytecode: where PYTHONDONTWRITEBYTECODE is set, nothing caches .pyc files and every
# `mplab train` compiled torch._dynamo and sympy from source (about 8 s of its first epoch here).
# --all-extras: the developer's full environment, the training stack (`train`) and Ray (`cluster`, for
# `mplab run --cluster` and tests/test_cluster.py, which CI must run, not skip); `uv run` syncs inexactly,
# so it keeps them. `make setup-lab` installs the base alone, as `pip install mplab` does.
python:
	command -v $(UV) >/dev/null || python3 -m pip install --quiet uv || python3 -m pip install --quiet --break-system-packages uv
	$(UV) sync --frozen --compile-bytecode --all-extras
	rm -f $(LAB_MARKER)

python-lab:
	command -v $(UV) >/dev/null || python3 -m pip install --quiet uv || python3 -m pip install --quiet --break-system-packages uv
	$(UV) sync --frozen --compile-bytecode --no-dev
	touch $(LAB_MARKER)

# The suite in two steps (both always run; the exit code is the first failure's): most of it on
# TEST_WORKERS pytest-xdist workers, a test module per worker at a time (module fixtures are built
# once); then the tests marked `machine` alone (BPF struct_ops, the allowed congestion-control list,
# rates held to 5 %: machine-wide state or timing that another worker's testbed would disturb).
# Two workers per core, at most 8: the suite mostly waits (transfers, meters, daemons), so two workers kept
# this 2-core machine's CPU half idle; four ran the workers step in 6:09 where two took 9:21 (docs/research/2026-11-27-suite-time.md).
# Modules go to workers longest first (tests/conftest.py, MODULE_SECONDS; --no-loadscope-reorder keeps that
# order: xdist's own sorts by test count and left the long few-test modules for last).
# Each step ends with its slowest tests (--durations), where the suite's time goes.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n * 2 > 8 ? 8 : n * 2 )))
PYTEST_ARGS ?=
test: lint
	@rc=0; \
	$(UV_RUN) pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not machine" --durations=15 $(PYTEST_ARGS) || rc=$$?; \
	$(UV_RUN) pytest -m machine --durations=10 $(PYTEST_ARGS) || rc=$$?; \
	exit $$rc

# The linter first (seconds, and a failure stops before the ten-minute suite): ruff, configured in
# pyproject.toml ([tool.ruff]); tests/test_lint.py adds what ruff cannot say (noqa reasons, function length).
lint:
	$(UV_RUN) ruff check .

test-unit:
	$(UV_RUN) pytest -m "not root"

experiment:
	@if [ "$(SCENARIO)" = quick-setup2 ] && [ ! -f models/quick-setup2/model.json ]; then \
	  echo "experiment: scenarios/quick-setup2.yaml needs models/quick-setup2, which is missing: training it first (make setup2-model)"; \
	  $(MAKE) --no-print-directory setup2-model; fi
	$(UV_RUN) mplab run scenarios/$(SCENARIO).yaml --testbeds $(TESTBEDS)

# Setup II end to end on the emulated testbed from nothing: the Setup I sweep the model needs,
# its dataset, the model, then the controller comparison (11:52 measured: 440 s of training sweep, 246 s of comparison).
setup2: setup2-model
	$(UV_RUN) mplab run scenarios/quick-setup2.yaml

setup2-model:
	@if [ -f models/quick-setup2/model.json ]; then echo "setup2-model: models/quick-setup2 exists (delete it to retrain)"; else \
	  echo "setup2-model: sweeping scenarios/quick-setup2-train.yaml for training data" && \
	  $(UV_RUN) mplab run scenarios/quick-setup2-train.yaml --id quick-setup2-train-$$(date +%Y%m%dT%H%M%S) && \
	  $(UV_RUN) mplab dataset build $$(ls -d runs/quick-setup2-train-* | sort | tail -1) \
	    -o datasets/quick-setup2-train --train 3 --test 1 --force && \
	  $(UV_RUN) mplab train datasets/quick-setup2-train -o models/quick-setup2 --force; fi

dataset:
	@test -n "$(CAMPAIGN)" || { echo "no runs/$(SCENARIO)-* campaign: run 'make experiment' first" >&2; exit 2; }
	$(UV_RUN) mplab dataset build $(CAMPAIGN) -o $(DATASET) --keep-previous

train:
	$(UV_RUN) mplab train $(DATASET) -o $(MODEL) --keep-previous

# The report of the newest campaign; the dataset and model of the same scenario join it when they exist.
report:
	@test -n "$(CAMPAIGN)" || { echo "no runs/$(SCENARIO)-* campaign: run 'make experiment' first" >&2; exit 2; }
	$(UV_RUN) mplab report $(CAMPAIGN) $(if $(wildcard $(DATASET)/dataset.json),$(DATASET)) \
		$(if $(wildcard $(MODEL)/model.json),--model $(MODEL)) -o $(REPORT) --force

# The newest campaign beside the one before it (a rerun): per case B - A with its interval, drift flagged,
# what differs in their manifests.
rerun-report:
	@test -n "$(PREVIOUS)" || { echo "needs two runs/$(SCENARIO)-* campaigns: run 'make experiment' twice" >&2; exit 2; }
	$(UV_RUN) mplab report $(PREVIOUS) $(CAMPAIGN) -o $(REPORT)-rerun --force

# One worker and no job runner: about 0.5 GB instead of 3.4 GB for MLflow's defaults (15 processes).
mlflow-ui:
	@echo "starting the MLflow UI on http://127.0.0.1:$(MLFLOW_PORT) (store $(CURDIR)/mlflow.db); it answers after 15-60 s, Ctrl-C stops it"
	@echo "training runs: http://127.0.0.1:$(MLFLOW_PORT)/#/experiments?workflowType=machine_learning (the 'Model training' view)"
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(UV_RUN) mlflow server --workers 1 \
		--backend-store-uri sqlite:///$(CURDIR)/mlflow.db \
		--artifacts-destination $(CURDIR)/mlartifacts --host 127.0.0.1 --port $(MLFLOW_PORT)

clean-testbed:
	$(UV_RUN) mplab clean

clean: clean-testbed

# LTE cell and WiFi of a physical lab (lte/, wifi/). They need a lab inventory.
NEED_INVENTORY = @test -n "$(INVENTORY)" || { echo "make $@ needs a lab inventory with lte/wifi sections: make $@ INVENTORY=inventory/lab.yaml [SECRETS=secrets.yaml]" >&2; exit 2; }
SECRETS_OPT = $(if $(SECRETS),--secrets $(SECRETS))

lte-up:
	$(NEED_INVENTORY)
	$(UV_RUN) mplab lte up $(INVENTORY) $(SECRETS_OPT)

lte-down:
	$(NEED_INVENTORY)
	$(UV_RUN) mplab lte down $(INVENTORY)

lte-status:
	$(NEED_INVENTORY)
	$(UV_RUN) mplab lte status $(INVENTORY)

lte-check:
	$(NEED_INVENTORY)
	$(UV_RUN) mplab lte check $(INVENTORY)

wifi-up:
	$(NEED_INVENTORY)
	$(UV_RUN) mplab wifi up $(INVENTORY) $(SECRETS_OPT)

# The user guide as a site (MkDocs, Material theme). --strict: a broken link, a missing page or a page left out of
# mkdocs.yml's nav fails. The reference pages under docs/reference/ are generated: docs/gen_reference.py.
# The reference pages (commands, fields, exit codes) are generated from the code: regenerate them after changing
# a command, an option or a model (tests/test_docs_reference.py fails on a page that drifted).
reference:
	$(UV_RUN) python docs/gen_reference.py

docs: reference
	$(UV_RUN) mkdocs build --strict -d site
