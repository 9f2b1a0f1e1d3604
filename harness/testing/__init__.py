"""Test and bench rigs (the library never imports them)."""
