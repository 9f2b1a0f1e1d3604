"""Every `mplab` command, one module per command group; ``mplab.cli`` mounts them all.

    campaign    `mplab run`, `status`, `clean`
    cc          `mplab cc check|status`
    controller  `mplab controller policies|decide|serve`
    dataset     `mplab dataset build|publish|pull|list`
    lab         `mplab lab keys|prepare` (the lab's machines made ready)
    lte         `mplab lte ...` (the lab's LTE cell)
    meters      `mplab meters check|record`
    report      `mplab report`
    testbed     `mplab preflight`, `doctor`, `calibrate`
    training    `mplab train`, `mplab models list|promote|pull`
    watch       `mplab watch`
    verdicts    how the config checks print their daemons' verdicts (`lte`, `wifi` check-configs)
    wifi        `mplab wifi ...` (the lab's access points and supplicants)
    workspace   `mplab init` (a workspace of inventories and scenarios)

A command parses its options, calls the library and prints; what it does lives in the library
packages, which never import this one (tests/test_layers.py).
"""
