"""The lab's WiFi: hostapd on the two access points, wpa_supplicant on the receivers.

``render`` writes the configuration files from the inventory (passphrases from the
secrets file, checked there), ``deploy`` pushes them and restarts the daemons (APs
first), ``checks`` reads each receiver's association from ``wpa_cli status``; `mplab wifi`
is ``mplab.commands.wifi``.

Leaves to others: pushing files, restarting units, secrets and host lookup
(``harness.deploy``, shared with ``lte``). Imports ``harness`` only; never ``lte``.
"""
