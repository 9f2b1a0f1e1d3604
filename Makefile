# mplab: one command sets up, one tests, one runs the main job.
SHELL := /bin/bash
SCENARIO ?= quick
UV ?= uv
export UV_PYTHON_DOWNLOADS := never
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := iperf3 mptcpd iproute2 nftables ethtool procps kmod git \
                clang llvm libbpf-dev bpftool linux-perf \
                openssh-server openssh-client python3 python3-pip

# The newest campaign of $(SCENARIO) (ids end in a sortable time stamp), its dataset and model.
CAMPAIGN ?= $(lastword $(sort $(wildcard runs/$(SCENARIO)-*)))
DATASET ?= datasets/$(SCENARIO)
MODEL ?= models/$(SCENARIO)
MLFLOW_PORT ?= 5000

.PHONY: setup apt python test test-unit experiment dataset train mlflow-ui clean-testbed clean help

help:
	@echo "make setup          install system packages (apt) and the Python environment (uv)"
	@echo "make test           run the whole test suite (namespace tests need root)"
	@echo "make experiment     run scenarios/\$$(SCENARIO).yaml on the inventory it names (default: quick)"
	@echo "make dataset        build \$$(DATASET) from the newest runs/\$$(SCENARIO)-* campaign (or CAMPAIGN=...)"
	@echo "make train          train and export \$$(MODEL) from \$$(DATASET), tracked in MLflow (mlflow.db)"
	@echo "make mlflow-ui      serve the MLflow UI on http://127.0.0.1:\$$(MLFLOW_PORT)"
	@echo "make clean-testbed  remove namespaces, processes and state an interrupted run left behind"

setup: apt python

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
