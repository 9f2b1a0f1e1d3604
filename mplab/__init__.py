"""The `mplab` command line: mounts each package's commands. Nothing imports this package."""
