# mplab: one command sets up, one tests, one runs the main job.
SHELL := /bin/bash
SCENARIO ?= quick
UV ?= uv
export UV_PYTHON_DOWNLOADS := never
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Every program mplab calls comes from one of these; harness/tools.py says which program needs which
# package, and tests/test_tools.py checks this list against it (and against every argv in the code).
APT_PACKAGES := iperf3 mptcpize iproute2 nftables ethtool procps kmod git \
                clang llvm libbpf-dev bpftool \
                openssh-server openssh-client ser2net python3 python3-pip iputils-ping

# The newest campaign of $(SCENARIO) (ids end in a sortable time stamp), its dataset and model.
CAMPAIGN ?= $(lastword $(sort $(wildcard runs/$(SCENARIO)-*)))
DATASET ?= datasets/$(SCENARIO)
MODEL ?= models/$(SCENARIO)
MLFLOW_PORT ?= 5000

.PHONY: setup apt apt-packages doctor python bpf test test-unit experiment dataset train mlflow-ui clean-testbed clean help lte-up lte-down lte-status lte-check wifi-up

help:
	@echo "make setup          install system packages (apt), the Python environment (uv) and the BPF congestion controls"
	@echo "make doctor         check this machine: programs, kernel features, Python packages (make setup ends with it)"
	@echo "make bpf            build the BPF congestion controls (harness/cc/bpf -> harness/cc/bpf/build)"
	@echo "make test           run the whole test suite (namespace tests need root)"
	@echo "make experiment     run scenarios/\$$(SCENARIO).yaml on the inventory it names (default: quick)"
	@echo "make dataset        build \$$(DATASET) from the newest runs/\$$(SCENARIO)-* campaign (or CAMPAIGN=...)"
	@echo "make train          train and export \$$(MODEL) from \$$(DATASET), tracked in MLflow (mlflow.db)"
	@echo "make mlflow-ui      serve the MLflow UI on http://127.0.0.1:\$$(MLFLOW_PORT)"
	@echo "make clean-testbed  remove namespaces, processes and state an interrupted run left behind"
	@echo "make lte-up INVENTORY=inventory/<lab>.yaml [SECRETS=<file>]   configure and start the LTE cell"
	@echo "make lte-down INVENTORY=...   stop it;  make lte-status / lte-check INVENTORY=...   inspect it"
	@echo "make wifi-up INVENTORY=... [SECRETS=<file>]   configure the APs and receivers' WiFi, check association"

setup: apt python
	$(MAKE) bpf
	$(MAKE) --no-print-directory doctor

# The set-up's self-check: every program (with versions), the kernel features, the Python packages.
# Exits non-zero with the fix when something essential is missing.
doctor:
	$(UV) run --frozen mplab doctor

apt-packages:
	@echo $(APT_PACKAGES)

# BPF struct_ops congestion controls (lia, olia, balia, wvegas) and the arithmetic checker.
# vmlinux.h comes from the running kernel's BTF (CO-RE: the objects load on other kernels too).
# Without BTF or clang this prints why and leaves the objects absent: a scenario that names a
# coupled algorithm is then refused at preflight with the same reason, never silently replaced.
BPF_DIR := harness/cc/bpf
BPF_BUILD := $(BPF_DIR)/build
BPF_OBJS := $(patsubst %,$(BPF_BUILD)/%.bpf.o,lia olia balia wvegas calc)
BPF_CFLAGS := -target bpf -O2 -g -mcpu=v3 -Wall -Wno-unused-variable

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

apt:
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $(APT_PACKAGES)

python:
	command -v $(UV) >/dev/null || python3 -m pip install --quiet uv || python3 -m pip install --quiet --break-system-packages uv
	$(UV) sync --frozen

test:
	$(UV) run --frozen pytest

test-unit:
	$(UV) run --frozen pytest -m "not root"

experiment:
	$(UV) run --frozen mplab run scenarios/$(SCENARIO).yaml

dataset:
	@test -n "$(CAMPAIGN)" || { echo "no runs/$(SCENARIO)-* campaign: run 'make experiment' first" >&2; exit 2; }
	$(UV) run --frozen mplab dataset build $(CAMPAIGN) -o $(DATASET) --force

train:
	$(UV) run --frozen mplab train $(DATASET) -o $(MODEL) --force

mlflow-ui:
	$(UV) run --frozen mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlflow.db \
		--default-artifact-root $(CURDIR)/mlartifacts --host 127.0.0.1 --port $(MLFLOW_PORT)

clean-testbed:
	$(UV) run --frozen mplab clean

clean: clean-testbed

# LTE cell and WiFi of a physical lab (lte/, wifi/). They need a lab inventory.
NEED_INVENTORY = @test -n "$(INVENTORY)" || { echo "make $@ needs a lab inventory with lte/wifi sections: make $@ INVENTORY=inventory/lab-lte.yaml [SECRETS=secrets.yaml]" >&2; exit 2; }
SECRETS_OPT = $(if $(SECRETS),--secrets $(SECRETS))

lte-up:
	$(NEED_INVENTORY)
	$(UV) run --frozen mplab lte up $(INVENTORY) $(SECRETS_OPT)

lte-down:
	$(NEED_INVENTORY)
	$(UV) run --frozen mplab lte down $(INVENTORY)

lte-status:
	$(NEED_INVENTORY)
	$(UV) run --frozen mplab lte status $(INVENTORY)

lte-check:
	$(NEED_INVENTORY)
	$(UV) run --frozen mplab lte check $(INVENTORY)

wifi-up:
	$(NEED_INVENTORY)
	$(UV) run --frozen mplab wifi up $(INVENTORY) $(SECRETS_OPT)
