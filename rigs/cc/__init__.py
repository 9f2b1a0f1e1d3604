"""Research code for congestion control, outside the installed library: the reference modules in Python
(``oracle``), a packet-level FIFO driven by them (``sim``), and the BPF arithmetic checker (``calc`` on
``harness.cc.libbpf``). Benches and tests import it; mplab's commands never do.
"""
