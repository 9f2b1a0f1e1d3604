"""mplab's orchestration core: hosts, testbeds, traffic, meters, campaigns.

Nothing here imports the command line (``mplab``) or the packages above it.
"""
__version__ = "0.1.0"
