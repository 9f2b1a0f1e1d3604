"""Rigs for tests and benches; the library never imports them (tests/test_layers.py).

    sshrig      a real sshd in each namespace of an emulated testbed, so the lab path runs here
    bottleneck  two subflows and a TCP flow through one FIFO (coupled-CC fairness)
    synthetic   paper-size synthetic campaigns of SampleRecords from a simple power model

Leaves to others: everything they exercise.
"""
