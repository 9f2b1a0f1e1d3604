"""The sender's iperf3 servers: a fresh one-off server for every test (``harness.traffic.IperfServers``).

Real iperf3 servers and clients on this machine (no namespace, no root). A raw TCP connection stands for the
previous test that a server has not let go of yet.
"""
from __future__ import annotations

import json
import socket

import pytest

from harness.errors import NotReady
from harness.hosts.local import LocalHost
from harness.traffic import Iperf3, IperfServers, parse_iperf3
from rigs.ports import free_port


@pytest.fixture
def servers():
    host = LocalHost("sender")
    srv = IperfServers(host, Iperf3.check(host), {"n1": free_port()})
    srv.LISTEN_S = 5.0
    try:
        yield srv
    finally:
        srv.stop()


def _client(srv: IperfServers) -> dict:
    argv = srv.iperf3.client_argv("127.0.0.1", srv.ports["n1"], 2**20, bind=None, mptcp=True, cc=None)
    return json.loads(srv.host.run(argv, check=False, timeout=60).stdout)


def test_a_server_serves_one_test_and_the_next_test_gets_a_new_one(servers):
    servers.fresh(["n1"])
    first = servers._procs["n1"]
    assert "-1" in first.argv
    assert parse_iperf3(json.dumps(_client(servers))).bytes == 2**20
    servers.fresh(["n1"])
    assert servers._procs["n1"] is not first and first.poll() is not None
    assert parse_iperf3(json.dumps(_client(servers))).bytes == 2**20


def test_a_test_starts_even_while_the_last_server_still_holds_a_connection(servers):
    servers.fresh(["n1"])
    # The server accepts this as a test's control connection and waits for its cookie: busy, the way a
    # persistent server is while it winds up a test whose client has gone.
    with socket.create_connection(("127.0.0.1", servers.ports["n1"]), timeout=5):
        servers.fresh(["n1"])
        doc = _client(servers)
    # A server kept across tests answers "the server is busy running a test"; a fresh one serves it.
    assert not doc.get("error"), doc.get("error")
    assert parse_iperf3(json.dumps(doc)).bytes == 2**20


def test_a_port_that_something_else_listens_on_is_named(servers):
    servers.LISTEN_S = 0.5
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", servers.ports["n1"]))
        squatter.listen()
        with pytest.raises(NotReady, match=rf"listeners closed.*still open: \[{servers.ports['n1']}\]"):
            servers.fresh(["n1"])
    assert "n1" not in servers._procs
