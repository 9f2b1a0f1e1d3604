"""Secrets never reach an error message or a log."""
from __future__ import annotations

import io
import logging

import pytest

from harness.errors import ConfigError
from harness.deploy.secrets import install_redaction, load_secrets

K = "00112233445566778899aabbccddeeff"
OPC = "000102030405060708090a0b0c0d0e0f"


def _write(tmp_path, text):
    p = tmp_path / "secrets.yaml"
    p.write_text(text)
    p.chmod(0o600)
    return p


@pytest.mark.parametrize("body, secret", [
    ("passwords:\n  enb-admin: 73519468\n", "73519468"),
    (f'sim:\n  "001010000000001": {{k: 12345678901234567890123456789012, opc: {OPC}}}\n',
     "12345678901234567890123456789012"),
    ("wifi_psk:\n  ap1: 9876543210\n", "9876543210"),
])
def test_number_typed_secret_is_refused_without_echo(tmp_path, body, secret):
    p = _write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_secrets(p)
    assert secret not in str(info.value)
    assert str(p) in str(info.value)


def test_logged_exception_text_is_scrubbed(tmp_path):
    secrets = load_secrets(_write(tmp_path, f'sim:\n  "001010000000001": {{k: {K}, opc: {OPC}}}\n'
                                            "passwords:\n  enb-admin: 'hunter2-long'\n"))
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        install_redaction(secrets)
        log = logging.getLogger("mplab.test-faults-secrets")
        try:
            raise RuntimeError(f"provisioning failed: key {K}, password hunter2-long")
        except RuntimeError:
            log.exception("while provisioning %s", "hunter2-long")
    finally:
        root.removeHandler(handler)
    out = buf.getvalue()
    assert "provisioning failed" in out and "RuntimeError" in out
    assert K not in out and "hunter2-long" not in out
    assert out.count("[secret]") >= 3


def test_lte_render_on_the_open5gs_path_refuses_a_readable_or_invalid_secrets_file(tmp_path):
    """Open5GS renders no file with the SIM keys, but a --secrets file given to it is read and checked like on
    the srsEPC path: a group-readable one (0644) or one that is not a secrets file exits 2, and nothing is
    written."""
    from rigs.ltelab import LAB

    from .conftest import mplab

    open_file = tmp_path / "open.yaml"
    open_file.write_text("sim: {}\n")
    open_file.chmod(0o644)
    bad = tmp_path / "bad.yaml"
    bad.write_text("sim: 5\nwifi: [1]\n")
    bad.chmod(0o600)
    for path, says in ((open_file, "chmod 600"), (bad, str(bad))):
        out = tmp_path / f"out-{path.stem}"
        res = mplab("lte", "render", str(LAB), "--version", "2.7.2", "--secrets", str(path), "--out", str(out))
        assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr, res.stderr[-1500:]
        assert not out.exists()
    res = mplab("lte", "render", str(LAB), "--version", "2.7.2", "--out", str(tmp_path / "ok"))
    assert res.returncode == 0 and (tmp_path / "ok" / "epc").is_dir(), res.stderr[-1500:]
