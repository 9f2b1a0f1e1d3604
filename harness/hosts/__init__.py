"""The Host seam: run a command (argv, deadline), start and stop background processes, put and get files.

    local   Host, BackgroundProcess, LocalHost and NamespaceHost (``ip netns exec``), gated starts
    ssh     SSHHost on fabric/paramiko: the same interface to a lab machine
    ready   wait_until: poll a condition with a deadline, NotReady naming what did not come up
    netcmd  pure argv builders for ip, tc, sysctl, ethtool (tests check them without a kernel)

Leaves to others: which hosts exist (``harness.config``, ``harness.deploy.machines``) and
what runs on them (testbeds, traffic, meters, deploy code).
"""
