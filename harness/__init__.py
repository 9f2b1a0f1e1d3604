"""mplab's library: everything from an inventory and a scenario to a dataset, lowest layer first.

    hosts/      the Host seam: local, network namespace, SSH; argv builders; the readiness loop
    cc/         congestion controls by name, the kernel's flavour, mplab's BPF struct_ops
    config/     inventory and scenario schemas (pydantic), loading with file/field/reason errors
    deploy/     what lab bring-up shares: secrets, host lookup, file push with backups, systemd units
    meters/     energy meters (UM25C family, INA bridges, the emulated device), the recorder, ser2net
    traffic.py  iperf3: servers, gated clients, their JSON
    upkeep/     hosts fit for a campaign: preflight checks, `mplab doctor`, prefix claims, clean-up
    emulation/  what only the emulated testbed needs: radio sharing and loop, delay line, speed-up, calibration
    testbeds/   the Testbed seam: its kinds (emulated in namespaces, lab over SSH) and their registry
    campaign/   one entry point (entry.py), plan, runner, store, the one sample record, metadata, status
    dataset/    campaigns -> a validated, split, documented dataset; published versions
    watch/      `mplab watch`'s live page of a campaign (reads the store only)
    errors.py files.py machine.py tools.py tables.py resources.py build.py   errors, atomic writes, the
                machine-wide record, program -> package, the commands' tables, the files shipped in the packages,
                what this installation is (version, commit)
    artifacts.py mlflow_store.py model_registry.py modelfile.py onnxrt.py citations.py   published
                artifacts, the one resolver of ``models:/``, the one reader of ``model.json``, ONNX
                Runtime sessions, the papers
    data/       the papers' tables, headlines and citations (package data, read through resources.py)

A sub-package imports only those listed before it, so they never form a circle
(tests/test_layers.py). Leaves to others: the radio stacks (``lte``, ``wifi``), models
(``training``), control (``controller``), reports (``analysis``), the command line (``mplab``)
and the test and bench rigs (``rigs``, outside the installed library). Nothing here imports them.
"""
__version__ = "0.1.0"
