"""The Testbed seam: a sender and receiver Nodes built from an inventory, set up, checked, torn down.

    base      Testbed (its life cycle and declared capabilities), Node, Health; iperf3 servers, counters
    emulated  EmulatedTestbed: namespaces, veths, HTB shaping, emulated meters (the default)
    health    a receiver's links, routes and policy tables, repaired before each sample
    lab       LabTestbed: real machines over SSH, ser2net meters
    kinds     TESTBEDS (inventory kind -> class), register_testbed (a kind added at run time), build_testbed

Leaves to others: what only the emulated testbed runs (``harness.emulation``: radio sharing and
loop, delay line, speed-up, calibration), preflight checks, claims and clean-up
(``harness.upkeep``), the machine-wide record (``harness.machine``), commands (``harness.hosts``),
congestion controls, meters and traffic (``harness.cc``, ``harness.meters``, ``harness.traffic``),
and what to run on a testbed (``harness.campaign``).
"""
