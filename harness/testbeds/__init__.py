"""The Testbed seam: a sender and receiver Nodes built from an inventory, set up, checked, torn down.

    base       Testbed (its life cycle and declared capabilities), Node, Check, Health; iperf3 servers, counters
    emulated   EmulatedTestbed: namespaces, veths, HTB shaping, emulated meters (the default)
    health     a receiver's links, routes and policy tables, repaired before each sample
    claim      one live testbed per namespace prefix, its holder named (campaign, pid)
    lab        LabTestbed: real machines over SSH, ser2net meters
    preflight  per-host checks (reachability, kernel, MPTCP, CCs, interfaces, iperf3, clock)
    clean      clean_prefix: an explicit tuple of cleaners for what crashed testbeds left
    kinds      TESTBEDS (inventory kind -> class), register_testbed (a kind added at run time), build_testbed
    ser2net    the ser2net command line for a receiver's meter
    cli        `mplab preflight`

Leaves to others: the machine-wide record (``harness.machine``), commands (``harness.hosts``),
congestion controls, meters and traffic (``harness.cc``, ``harness.meters``, ``harness.traffic``),
and what to run on a testbed (``harness.campaign``).
"""
