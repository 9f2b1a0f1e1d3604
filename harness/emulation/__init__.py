"""What only the emulated testbed needs: the radios' sharing, their loop, the delay line, scaling, calibration.

    sharing      how an access network shares its downlink among active receivers (pure functions)
    radiolink    the radio loop: re-shares each access network as receivers start and finish (a process)
    delayline    a user-space delay line on a TUN device, per receiver path (a process; no netem here)
    access       a receiver's LTE access: the emulated channel, or a real cell passed in by the CLI
    speedup      the testbed scaled by a factor S, and the validated S of bench/speedup.py
    sendertail   the sender's iperf3 servers stopped while they spin after their last write
    calibration  the fit of an emulated inventory to the reference paper's Tables 2-3 (`mplab calibrate`)

Leaves to others: building the namespaces and links (``harness.testbeds.emulated``), running
samples (``harness.campaign``), and the emulated meter (``harness.meters.emulated``).
"""
