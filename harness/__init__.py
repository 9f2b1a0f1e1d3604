"""mplab's library: everything from an inventory and a scenario to a dataset, in data-flow order.

    config/    inventory and scenario schemas (pydantic), loading with file/field/reason errors
    hosts/     the Host seam: local, network namespace, SSH; argv builders
    deploy/    what lab bring-up shares: secrets, host lookup, file push with backups, systemd units
    testbeds/  the Testbed seam: emulated (namespaces) and lab (SSH); preflight; clean-up
    cc/ meters/ traffic.py   congestion controls, energy meters, iperf3
    campaign/  plan, runner, store, the one sample record, metadata, summary
    dataset/   campaigns -> a validated, split, documented dataset
    testing/   rigs for tests and benches (the library never imports them)
    errors.py files.py machine.py tools.py   errors, atomic writes, the machine-wide record, program -> package

Leaves to others: the radio stacks (``lte``, ``wifi``), models (``training``), control
(``controller``), reports (``analysis``) and the command line (``mplab``). Nothing here
imports them (tests/test_layers.py).
"""
__version__ = "0.1.0"
