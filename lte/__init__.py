"""The lab's LTE cell: srsRAN 4G ``srsenb`` and an Open5GS EPC, driven from the inventory.

Modules: ``secrets`` (SIM keys from a 0600 file), ``version`` (which Open5GS schema),
``render`` (enb.conf/rr.conf/sib.conf/rb.conf and each EPC daemon's YAML),
``subscribers`` (MongoDB documents as open5gs-dbctl writes them), ``services``
(systemd units and their dependency order), ``deploy`` (push with backups, restart,
logs), ``checks`` (S1 setup, attach, ping; a diagnosis naming step and host), ``zmq``
(the optional all-software single-UE cell). Imports ``harness`` only; ``harness``
never imports this package.
"""
