"""Deciding from a daemon's output whether it got past its configuration (``harness.deploy.trial.decide``),
on output captured from the real srsenb 23.04 and Open5GS 2.7.2 (this machine: no SCTP, no MongoDB)."""
from __future__ import annotations

from harness.deploy.trial import Trial, decide
from lte.realcheck import O5GS_BLOCKED, O5GS_FAILED, O5GS_PASSED, SRS_FAILED, SRS_PASSED, SRS_WARNED

SRSENB = Trial("srsenb", ("srsenb",), SRS_PASSED, SRS_FAILED, warned=SRS_WARNED)
O5GS = Trial("open5gs", ("open5gs-hssd",), O5GS_PASSED, O5GS_FAILED, blocked=O5GS_BLOCKED)

# srsenb on the rb.conf mplab once wrote: stdout is block-buffered, so its lines are not
# interleaved with stderr's in time.
OLD_RB_STDOUT = """---  Software Radio Systems LTE eNodeB  ---

Reading configuration file /tmp/x/enb.conf...

Built in Release mode using 23.04.0.

Error processing arguments.
"""
OLD_RB_STDERR = """Error section five_qi_config not found.
Optional 5G SRB configuration is not supported yet.
Please specify 5G SRB1 and SRB2 configuration.
Error parsing RB configuration
"""
# srsenb on the fixed files but an rrc_inactivity_timer of 10000: it complains and goes on to its radio.
LOW_TIMER_STDOUT = """Built in Release mode using 23.04.0.

Warning: Inactivity timeout is smaller than the sum of t310, t311 and n310.
This may break the UE's re-establishment procedure.
Opening 1 channels in RF device=UHD with args=recv_frame_size=9232,send_frame_size=9232
Supported RF device list: zmq file
Error initializing radio.
"""
LOW_TIMER_STDERR = ("\x1b[31m/src/srsenb/src/enb_cfg_parser.cc:1994: rrc_inactivity_timer=10000 is too low. Consider "
                    "setting it to a value equal or above 10251\x1b[0m\nCould not create socket\n")
HSS = ("11/24 01:06:38.021: [dbi] WARNING: Failed to connect to server [mongodb://localhost/open5gs] "
       "(../lib/dbi/ogs-mongoc.c:122)\n11/24 01:06:38.021: [app] WARNING: Failed to initialize HSS\n")
SGWC_NO_GLOBAL = ("11/24 01:06:45.682: [core] FATAL: epoll_create() failed (22:Invalid argument) "
                  "(../lib/core/ogs-epoll.c:78)\n11/24 01:06:45.682: [core] FATAL: epoll_init: should not be reached.\n")


def test_parse_errors_fail_with_the_parsers_lines_first():
    ok, detail = decide(OLD_RB_STDOUT, OLD_RB_STDERR, SRSENB)
    assert not ok
    assert detail.startswith("Error section five_qi_config not found. / Optional 5G SRB configuration")


def test_radio_reached_passes_and_keeps_the_complaints():
    ok, detail = decide(LOW_TIMER_STDOUT, LOW_TIMER_STDERR, SRSENB)
    assert ok and detail.startswith("Opening 1 channels in RF device=UHD")
    assert "rrc_inactivity_timer=10000 is too low" in detail and "\x1b" not in detail


def test_open5gs_stopped_by_this_machine_after_parsing_passes_and_says_so():
    ok, detail = decide("", HSS, O5GS)
    assert ok and detail.startswith("past its configuration, then stopped by this machine:")
    ok, detail = decide("", SGWC_NO_GLOBAL, O5GS)
    assert not ok and "epoll_create() failed" in detail


def test_undecided_until_a_deciding_line():
    assert decide("Reading configuration file /x/enb.conf...\n", "", SRSENB) is None
