"""The lab's LTE cell: srsRAN 4G ``srsenb`` and an Open5GS EPC, driven from the inventory.

Modules: ``secrets`` (SIM keys from the 0600 secrets file), ``version`` (which Open5GS
schema), ``render`` (enb.conf/rr.conf/sib.conf/rb.conf and each EPC daemon's YAML, as
``ConfigFile``s), ``subscribers`` (MongoDB documents as open5gs-dbctl writes them),
``services`` (the daemons and their dependency order), ``deploy`` (push, ogstun,
subscribers, restart in order, logs), ``checks`` (S1 setup, attach, ping; a diagnosis
naming step and host), ``hosts`` (the cell's hosts, the subscriber database's URI), ``zmq``
(the optional all-software single-UE cell), ``tunnel`` (SSH port forwards). The commands (`mplab lte`) are ``mplab.commands.lte``.

Leaves to others: pushing files, restarting units, secrets and host lookup
(``harness.deploy``, shared with ``wifi``). Imports ``harness`` only; never ``wifi``.
"""
