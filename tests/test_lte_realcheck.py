"""The real srsRAN 4G and Open5GS programs on the rendered configs (``mplab lte check-configs``).

Marked ``real_lte``: they run the programs found under $MPLAB_LTE_BIN or on PATH and skip, saying
which program is missing, when there are none. A lab installs them as docs/lte.md says.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from harness.deploy.trial import run_trial, scratch_netns
from lte.realcheck import bin_dirs, check_configs, plan, scratch_addresses
from rigs.ltelab import LAB, REPO, lab_inventory


def _need(*programs):
    from harness.deploy.trial import find_program
    missing = [p for p in programs if find_program(p, bin_dirs()) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (not on PATH or under $MPLAB_LTE_BIN)")


def _need_open5gs(schema: str) -> None:
    """Skip unless the Open5GS found (open5gs-mmed -v) writes ``schema``'s layout ("2.6" or "2.7")."""
    from harness.deploy.trial import find_program
    from lte.realcheck import installed_open5gs_version
    mmed = find_program("open5gs-mmed", bin_dirs())
    v = installed_open5gs_version(mmed) if mmed else None
    if v is None or v.schema != schema:
        pytest.skip(f"needs Open5GS {schema}.x; found {v or 'none'} (open5gs-mmed -v)")


def _broken(prefix, tmp_path, name: str, path: str, edit):
    """Render the lab's files, break ``path`` (relative to the scratch directory) with ``edit``, run ``name``."""
    inv = lab_inventory()
    p = plan(inv, tmp_path, bin_dirs())
    f = tmp_path / path
    f.write_text(edit(f.read_text()))
    trial = next(t for t in p.trials if t.name.startswith(name))
    with scratch_netns(f"{prefix}lte", scratch_addresses(inv)) as ns:
        return run_trial(ns, trial)


def test_absent_programs_are_reported_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr("harness.deploy.trial.SYSTEM_SBIN", ())
    p = plan(lab_inventory(), tmp_path, dirs=[])
    assert p.trials == ()
    assert [(v.name, v.word) for v in p.absent] == [("srsenb", "absent"), ("srsue", "absent"), ("open5gs", "absent")]


def test_cli_without_programs_says_so(tmp_path):
    env = {"PATH": str(tmp_path), "MPLAB_LTE_BIN": ""}
    res = subprocess.run([sys.executable, "-m", "mplab", "lte", "check-configs", str(LAB)], capture_output=True,
                         text=True, cwd=REPO, timeout=60, env=env)
    if "absent" not in res.stdout or "ok " in res.stdout:
        pytest.skip("LTE programs are installed in a system directory here")
    # A check that checked nothing did not pass: exit 1, saying so.
    assert res.returncode == 1, res.stderr
    assert "error: nothing checked: no srsRAN 4G or Open5GS program found here" in res.stderr, res.stderr


@pytest.mark.root
@pytest.mark.real_lte
def test_srsenb_and_srsue_accept_the_rendered_files(prefix, tmp_path):
    _need("srsenb", "srsue")
    _, verdicts = check_configs(lab_inventory(), f"{prefix}lte", tmp_path)
    got = {v.name: v for v in verdicts}
    for name in ("srsenb", "srsue"):
        assert got[name].ok, f"{name}: {got[name].detail}\n{got[name].output[-2000:]}"


@pytest.mark.root
@pytest.mark.real_lte
def test_srsenb_refuses_an_rb_conf_without_the_5g_sections(prefix, tmp_path):
    """The check can fail: the rb.conf mplab once wrote (no five_qi_config, no 5G SRBs)."""
    _need("srsenb")
    v = _broken(prefix, tmp_path, "srsenb", "enb/rb.conf", lambda text: text.split("srb1_5g_config")[0])
    assert v.ok is False, v.output[-2000:]
    assert "5G SRB" in v.detail or "five_qi_config" in v.detail or "RB configuration" in v.detail, v.detail


@pytest.mark.root
@pytest.mark.real_lte
def test_open5gs_daemons_accept_the_rendered_files(prefix, tmp_path):
    _need("open5gs-sgwcd", "open5gs-sgwud")
    _, verdicts = check_configs(lab_inventory(), f"{prefix}lte", tmp_path)
    bad = [f"{v.name}: {v.detail}" for v in verdicts if v.name.startswith("open5gs") and v.ok is False]
    assert not bad, bad


@pytest.mark.root
@pytest.mark.real_lte
@pytest.mark.parametrize("schema, daemon, key, error", [
    ("2.7", "sgwc", "global", "epoll_create() failed"),             # sgwc.yaml as mplab once wrote it
    ("2.6", "smf", "sbi", "TLS enabled but no server key"),         # smf.yaml as mplab wrote it for 2.6 before
])
def test_open5gs_refuses_a_file_without_the_section_it_needs(prefix, tmp_path, schema, daemon, key, error):
    """The check can fail: the installed Open5GS stops on its file without ``key`` (its schema's case only)."""
    _need(f"open5gs-{daemon}d")
    _need_open5gs(schema)
    import yaml

    def drop(text):
        doc = yaml.safe_load(text)
        del doc[key]
        return yaml.safe_dump(doc)
    v = _broken(prefix, tmp_path, f"open5gs-{daemon}d", f"epc/{daemon}.yaml", drop)
    assert v.ok is False and error in v.detail, v.detail


@pytest.mark.root
@pytest.mark.real_lte
def test_srsepc_reads_epc_conf_and_user_db_and_refuses_a_short_row(prefix, tmp_path):
    _need("srsepc")
    inv = lab_inventory()
    p = plan(inv, tmp_path, bin_dirs())
    trial = next(t for t in p.trials if t.name.startswith("srsepc"))
    with scratch_netns(f"{prefix}lte", scratch_addresses(inv)) as ns:
        good = run_trial(ns, trial)
        db = tmp_path / "srsepc" / "user_db.csv"
        db.write_text("n1,mil,001010000000001," + "0" * 32 + ",opc," + "0" * 32 + ",8000,000000000000,9\n")
        bad = run_trial(ns, trial)
    assert good.ok, good.output[-2000:]
    assert bad.ok is False and "Wrong number of columns" in bad.detail, bad.detail


def _enb_started(prefix, tmp_path, n_prb: int, edit=None):
    """srsenb on mplab's files for ``n_prb`` PRB on the ZeroMQ radio (no SDR here), run until it says
    "==== eNodeB started ===" — after its MAC checked the cell — or an error line."""
    from harness.deploy.trial import Trial, find_program
    from harness.config.inventory import Inventory
    from lte.realcheck import SRS_FAILED, redirected, write
    from lte.render import render_srsenb
    from rigs.ltelab import lab_data
    d = lab_data()
    d["lte"]["enb"].update(n_prb=n_prb, rf={"device_name": "zmq", "device_args":
                                            "tx_port=tcp://*:2000,rx_port=tcp://localhost:2001,base_srate=23.04e6"})
    inv = redirected(Inventory.model_validate(d), tmp_path)
    files = render_srsenb(inv)
    write(files)
    if edit:
        p = tmp_path / "enb" / "sib.conf"
        p.write_text(edit(p.read_text()))
    trial = Trial("srsenb", (find_program("srsenb", bin_dirs()), str(tmp_path / "enb" / "enb.conf")),
                  (r"^==== eNodeB started ===",), SRS_FAILED, deadline_s=120)
    with scratch_netns(f"{prefix}lte", scratch_addresses(inv)) as ns:
        return run_trial(ns, trial)


@pytest.mark.root
@pytest.mark.real_lte
@pytest.mark.parametrize("n_prb", [6, 15, 25, 50, 75, 100])
def test_srsenb_starts_its_cell_at_every_bandwidth(prefix, tmp_path, n_prb):
    _need("srsenb")
    v = _enb_started(prefix, tmp_path, n_prb)
    assert v.ok, f"{v.detail}\n{v.output[-2000:]}"
    assert "Invalid PUCCH" not in v.output and "Invalid PRACH" not in v.output, v.output[-2000:]


@pytest.mark.root
@pytest.mark.real_lte
def test_srsenb_itself_refuses_the_old_6_prb_pucch(prefix, tmp_path):
    """The check can fail: sib.conf as mplab wrote it before (n_rb_cqi = 2 at 6 PRB)."""
    _need("srsenb")
    v = _enb_started(prefix, tmp_path, 6, lambda t: t.replace("n_rb_cqi = 1;", "n_rb_cqi = 2;"))
    assert v.ok is False and "nrb_pucch=2 does not allow space for Msg3" in v.detail, v.output[-2000:]
