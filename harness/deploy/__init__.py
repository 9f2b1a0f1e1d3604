"""What bringing up lab machines shares (used by ``lte`` and ``wifi``, which never import each other).

    secrets   the 0600 secrets file (SIM keys, WiFi passphrases), SecretStr values, log redaction
    machines  a Host per inventory machine name (SSH with the lab's defaults, else this machine)
    files     ConfigFile (one per rendered file) and pushing files with stamped backups
    services  systemd units behind a small interface, restart-and-wait, StepError
    prepare   `mplab lab prepare`: a board's packages, MPTCP, policy routing, modem link, meter binding
    keys      `mplab lab keys`: mplab's SSH key, host keys pinned in known_hosts, a login tried

Leaves to others: what to render and in which order to start it (``lte``, ``wifi``).
"""
