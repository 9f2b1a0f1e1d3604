"""The command line: ``mplab.cli`` is the one typer app; it mounts every command group of
``mplab.commands`` (one module each) and turns errors into exit codes, here and nowhere else.

Only this package knows every other one; nothing imports it, and no library package has a
command module of its own (tests/test_layers.py).
"""
