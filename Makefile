# mplab: one command sets up, one tests, one runs the main job.
SHELL := /bin/bash
SCENARIO ?= quick
UV ?= uv
export UV_PYTHON_DOWNLOADS := never
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

APT_PACKAGES := iperf3 mptcpd iproute2 nftables ethtool procps kmod git \
                clang llvm libbpf-dev bpftool linux-perf \
                openssh-server openssh-client ser2net python3 python3-pip iputils-ping

.PHONY: setup apt python test test-unit experiment clean-testbed clean help lte-up lte-down lte-status lte-check wifi-up

help:
	@echo "make setup          install system packages (apt) and the Python environment (uv)"
	@echo "make test           run the whole test suite (namespace tests need root)"
	@echo "make experiment     run scenarios/\$$(SCENARIO).yaml on the inventory it names (default: quick)"
	@echo "make clean-testbed  remove namespaces, processes and state an interrupted run left behind"
	@echo "make lte-up INVENTORY=inventory/<lab>.yaml [SECRETS=<file>]   configure and start the LTE cell"
	@echo "make lte-down INVENTORY=...   stop it;  make lte-status / lte-check INVENTORY=...   inspect it"
	@echo "make wifi-up INVENTORY=... [SECRETS=<file>]   configure the APs and receivers' WiFi, check association"

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
