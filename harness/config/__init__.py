"""What exists and what to run: the inventory and scenario schemas (pydantic), checked before anything runs.

    load       YAML -> model with file/field/reason errors (``ConfigError``), digests
    inventory  testbeds: sender, receivers (interfaces, meters), emulation or lab section,
               and the cross-checks of the radio sections against the rest
    radio      the lab's LTE cell and WiFi APs as data (bands, EARFCNs, PLMN)
    scenario   sweeps: congestion controls, receiver counts, interface modes, samples, file size

Pure data: nothing here touches a host. Building testbeds from an inventory is
``harness.testbeds``; planning samples from a scenario is ``harness.campaign.plan``.
"""
