"""The command line: ``mplab.cli`` mounts each package's typer app (its ``cli`` module).

Only this package knows every other one; nothing imports it (tests/test_layers.py).
Errors become exit codes here and nowhere else.
"""
