"""Keeping hosts fit for a campaign: checks before anything runs, prefix claims, clean-up of leftovers.

    preflight  Check (one check on one host) and per-host checks: kernel, MPTCP, CCs, interfaces, iperf3
    doctor     `mplab doctor`: is this machine able to run mplab (programs, kernel features, packages)
    ofprobe    does a lab switch answer an OpenFlow 1.3 handshake (lab preflight, the controller's too)
    claim      one live testbed per namespace prefix, its holder named (campaign, pid)
    clean      clean_prefix: an explicit tuple of cleaners for what crashed testbeds left

Leaves to others: the testbed kinds that run these (``harness.testbeds``) and the machine-wide
record of live testbeds (``harness.machine``).
"""
