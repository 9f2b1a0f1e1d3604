"""The inventory's lte/wifi sections: the reference lab loads; bad labs are refused with a clear reason."""
from __future__ import annotations

import pytest
import yaml

from harness.errors import ConfigError
from harness.config.inventory import load_inventory
from harness.config.radio import dl_freq_mhz, earfcn_range, ul_earfcn
from rigs.ltelab import LAB, lab_data


def _load(tmp_path, data):
    p = tmp_path / "inv.yaml"
    p.write_text(yaml.safe_dump(data))
    return load_inventory(p)


def test_reference_lab_loads():
    inv = load_inventory(LAB)
    assert inv.lte.enb.plmn == inv.lte.epc.plmn
    assert str(inv.lte.epc.ue_gateway) == "10.45.0.1"
    assert [r.sim.imsi for r in inv.receivers] == ["001010000000001", "001010000000002", "001010000000003"]
    assert inv.wifi.ap("receivers").channel != inv.wifi.ap("sender").channel


def test_band7_arithmetic_matches_reference_table():
    # band 7 arithmetic: docs/lte.md ("Band 7 and EARFCN")
    assert earfcn_range(7, 6) == (2757, 3443)
    assert earfcn_range(7, 25) == (2775, 3425)
    assert earfcn_range(7, 50) == (2800, 3400)
    assert earfcn_range(7, 100) == (2850, 3350)
    assert dl_freq_mhz(7, 3350) == 2680.0 and ul_earfcn(7, 3350) == 21350
    assert dl_freq_mhz(7, 2850) == 2630.0 and ul_earfcn(7, 2850) == 20850


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["lte"]["epc"]["plmn"].update(mnc="02"), "PLMN mismatch: eNB broadcasts 001/01 but the MME serves 001/02"),
    (lambda d: d["lte"]["enb"]["plmn"].update(mcc="999"), "PLMN mismatch"),
    (lambda d: d["lte"]["enb"].update(tac=8), r"TAC mismatch: eNB tac 8 is not among the MME's TACs \[7\]"),
    (lambda d: d["lte"]["enb"].update(dl_earfcn=3401), r"dl_earfcn: 3401 is outside band 7 for n_prb 50 \(valid: 2800..3400;"),
    (lambda d: d["lte"]["enb"].update(dl_earfcn=2700), "outside band 7"),
    (lambda d: d["lte"]["enb"].update(n_prb=100, dl_earfcn=3400), r"valid: 2850..3350"),
    (lambda d: d["lte"]["epc"].update(ue_pool="192.168.10.0/25"), "overlaps wifi AP rx-ap subnet 192.168.10.0/24"),
    (lambda d: d["lte"]["epc"].update(ue_pool="192.168.0.0/16"), "overlaps lte.lab_subnets"),
    (lambda d: d["lte"]["epc"].update(ue_pool="192.168.30.0/24"), "contains the eNB address 192.168.30.2"),
    (lambda d: d["lab"]["infra"][1]["ssh"].update(address="10.45.7.7"), "contains lab.infra epc's SSH address"),
    (lambda d: d["receivers"][1].pop("sim"), "receiver n2 has no IMSI"),
    (lambda d: d["receivers"][0]["sim"].update(imsi="999700000000001"), "does not start with the PLMN 00101"),
    (lambda d: d["receivers"][2]["sim"].update(imsi="001010000000001"), "share IMSI"),
    (lambda d: d["receivers"][0]["interfaces"]["lte"].update(address="10.46.0.11"), "must be a UE address inside"),
    (lambda d: d["wifi"]["aps"][1].update(channel=36), "share channel 36"),
    (lambda d: d["wifi"]["aps"][0].update(channel=14), "channel 14 is not a 5 GHz channel"),
    (lambda d: d["receivers"][0]["interfaces"]["wifi"].update(address="192.168.11.5"), "outside AP rx-ap's subnet"),
    (lambda d: d["lte"]["epc"].update(host="core"), r"lte.epc.host: 'core' is not in lab.infra"),
    (lambda d: d["lte"]["enb"].update(host="epc"), "lab.infra 'epc' has role 'epc', expected 'enb'"),
    (lambda d: d["wifi"]["aps"][0].update(host="nowhere"), r"wifi.aps\[0\].host: 'nowhere' is not in lab.infra"),
])
def test_refused_inventories(tmp_path, edit, match):
    data = lab_data()
    edit(data)
    with pytest.raises(ConfigError, match=match) as ei:
        _load(tmp_path, data)
    assert str(tmp_path / "inv.yaml") in str(ei.value)   # names the file
    assert ei.value.exit_code == 2


def test_emulated_inventory_needs_no_radio_sections():
    from rigs.ltelab import REPO
    inv = load_inventory(REPO / "inventory" / "emulated.yaml")
    assert inv.lte is None and inv.wifi is None
