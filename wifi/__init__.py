"""The lab's WiFi: hostapd on the two access points, wpa_supplicant on the receivers.

``render`` writes the configuration files from the inventory (passphrases from the
secrets file), ``deploy`` pushes them through Hosts and restarts the daemons (APs first),
``checks`` reads each receiver's association from ``wpa_cli status``. Imports
``harness`` (and ``lte.secrets`` for the secrets file) only.
"""
