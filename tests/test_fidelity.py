"""Emulation fidelity, the pure parts: sharing models, the calibration to the paper, receiver
selection, the power model's both-radio term, loss rules and the radio loop's parsing."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config.inventory import Inventory, PowerProfile, load_inventory
from harness.hosts.netcmd import RADIO_TABLE, radio_loss_argvs
from harness.campaign.plan import plan_campaign, select_receivers
from harness.meters.power import PowerModel
from harness.config.scenario import Scenario
from harness.emulation import calibration as cal
from harness.emulation.radiolink import LinkConfig, htb_rate_line, read_tx_bytes
from harness.emulation.sharing import AccessNetwork, share_rates, simulate_sample
from tests.conftest import small_inventory

REPO = Path(__file__).resolve().parent.parent
PAPER = REPO / "harness" / "data" / "paper" / "sensors-2023-7699.yaml"


# ------------------------------------------------------------------ sharing models

def test_dcf_gives_every_station_the_same_rate_and_a_slow_one_slows_all():
    net = AccessNetwork("dcf", 100)
    alone = share_rates(net, {"a": 30, "b": 30})
    assert alone == {"a": pytest.approx(15), "b": pytest.approx(15)}
    slow = share_rates(net, {"a": 30, "b": 30, "c": 6})
    x = 1 / (1 / 30 + 1 / 30 + 1 / 6)
    assert slow == {"a": pytest.approx(x), "b": pytest.approx(x), "c": pytest.approx(x)}
    assert sum(slow.values()) < sum(alone.values()) / 2  # the anomaly: adding a station halves the total


def test_airtime_gives_each_station_its_rate_over_n():
    got = share_rates(AccessNetwork("airtime", 100), {"a": 30, "b": 30, "c": 6})
    assert got == {"a": pytest.approx(10), "b": pytest.approx(10), "c": pytest.approx(2)}


def test_proportional_fair_follows_link_quality_and_caps_at_each_rate():
    got = share_rates(AccessNetwork("proportional-fair", 30), {"a": 40, "b": 20})
    assert got == {"a": pytest.approx(20), "b": pytest.approx(10)}
    # A station whose proportional share exceeds its own rate keeps its rate; the rest goes to the others.
    got = share_rates(AccessNetwork("proportional-fair", 30), {"a": 100, "b": 5})
    assert got["b"] == pytest.approx(30 * 5 / 105) and sum(got.values()) == pytest.approx(30)
    eq = share_rates(AccessNetwork("equal", 30), {"a": 40, "b": 5})
    assert eq == {"a": pytest.approx(25), "b": pytest.approx(5)}


def test_capacity_may_depend_on_the_active_count():
    net = AccessNetwork("equal", 50, {2: 30, 3: 24})
    assert sum(share_rates(net, {"a": 40, "b": 40}).values()) == pytest.approx(30)
    assert sum(share_rates(net, {"a": 40, "b": 40, "c": 40}).values()) == pytest.approx(24)
    assert net.capacity(1) == 30 and net.capacity(9) == 24  # nearest entry outside the table


def test_fluid_sample_reshares_when_a_receiver_finishes():
    wifi, lte = AccessNetwork("airtime", 100), AccessNetwork("equal", 100)
    res = simulate_sample(80, ["a", "b"], "wifi", wifi, lte, {"a": 40, "b": 10}, {"a": 1, "b": 1})
    # Both at r/2 until a is done (4 s, b has moved 20 Mbit), then b alone at 10: 6 s more.
    assert res["a"].duration_s == pytest.approx(4)
    assert res["b"].duration_s == pytest.approx(10)


# ------------------------------------------------------------------ calibration

def test_table2_read_as_totals_gives_positive_dcf_rates_matching_the_wifi_column():
    data = cal.load_paper(PAPER)
    rates = cal.wifi_rates(data)
    assert len(rates) == 9 and min(rates) > 0
    for n, total in zip(data.nodes, data.throughput_mbit["wifi-sptcp"]):
        assert n / sum(1 / r for r in rates[:n]) == pytest.approx(total)


def test_held_out_columns_never_reach_the_fit(tmp_path):
    doc = yaml.safe_load(PAPER.read_text())
    for col in ("sdn-balia", "sdn-cubic"):
        doc["tables"]["throughput_mbit"][col] = [999.0] * 6
        doc["tables"]["energy_j"][col] = [1.0] * 6
    poisoned = tmp_path / "paper.yaml"
    poisoned.write_text(yaml.safe_dump(doc))
    a, b = cal.calibrate(PAPER), cal.calibrate(poisoned)
    assert cal.inventory_text(a) == cal.inventory_text(b)
    assert sorted(cal.load_paper(PAPER).held_out) == ["sdn-balia", "sdn-cubic"]


def test_power_fit_keeps_few_terms_and_explains_table3():
    c = cal.calibrate(PAPER)
    kept = {k for k, v in c.fit.terms.items() if v > 0}
    assert len(kept) <= 4 and c.fit.max_rel <= 0.02
    assert "b_B" in kept or "theta_B" in kept, "MPTCP costs more than either radio: needs a both-radio term"
    # Ordering of Table 3 at every N: LTE < WiFi < both.
    by = {(r["column"], r["nodes"]): r["model_j"] for r in c.rows}
    for n in c.data.nodes:
        assert by[("lte-sptcp", n)] < by[("wifi-sptcp", n)] < by[("mptcp-balia", n)]
    assert cal.residual_check(c.rows) <= 0.10


def test_shipped_paper_lab_inventory_is_what_the_calibration_writes():
    text = cal.inventory_text(cal.calibrate(PAPER))
    assert (REPO / "inventory" / "paper-lab.yaml").read_text() == text, "rerun `mplab calibrate`"
    inv = load_inventory(REPO / "inventory" / "paper-lab.yaml")
    assert inv.emulation.power_profile.name == "paper-lab" and inv.emulation.power_profile.base_w == 0
    assert inv.emulation.wifi_sharing == "dcf" and inv.emulation.lte_sharing == "proportional-fair"


def test_unreadable_paper_file_is_a_config_error(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("nodes: [3]\n")
    with pytest.raises(cal.CalibrationError) as err:
        cal.load_paper(bad)
    assert err.value.exit_code == 2 and str(bad) in str(err.value)


# ------------------------------------------------------------------ inventory, plan, power

def test_sharing_must_fit_the_radio():
    base = small_inventory("mplab-x-", [(10, 10)]).model_dump(mode="json")
    base["emulation"]["wifi_ap"]["sharing"] = "proportional-fair"
    with pytest.raises(ValueError, match="WiFi AP shares by"):
        Inventory.model_validate(base)


def test_rotate_puts_every_receiver_in_each_count():
    inv = small_inventory("mplab-x-", [(10, 10)] * 5)
    names = [r.name for r in inv.receivers]
    assert select_receivers(names, 2, 1, "first") == select_receivers(names, 2, 4, "first") == ("n1", "n2")
    assert select_receivers(names, 2, 5, "rotate") == ("n1", "n5")  # wraps, inventory order
    sc = Scenario(name="r", congestion_controls=["cubic"], receiver_counts=[1, 3], modes=["wifi"],
                  samples_per_case=5, file_size="1M", receiver_selection="rotate")
    for k in (1, 3):
        seen = [n for p in plan_campaign(sc, inv) if p.n_receivers == k for n in p.receivers]
        assert sorted(set(seen)) == names and all(seen.count(n) == k for n in names)


def test_power_profile_accepts_zero_base_and_charges_both_radios_extra():
    prof = PowerProfile(name="p", source="test", base_w=0, wifi={"active_mw": 0, "mw_per_mbit": 100},
                        lte={"active_mw": 0, "mw_per_mbit": 100}, both={"mw_per_mbit": 20})
    m = PowerModel(prof)
    assert m.power_w(0.0, {}) == 0
    assert m.power_w(1.0, {"wifi": 10}) == pytest.approx(1.0)
    assert m.power_w(2.0, {"wifi": 10, "lte": 10}) == pytest.approx(2.0 + 0.4)


# ------------------------------------------------------------------ loss rules, radio loop

def test_loss_rules_are_per_device_in_our_own_table():
    assert radio_loss_argvs([]) == []
    cmds = radio_loss_argvs([("rx1", 1.0), ("rx2", 0.0), ("rx3", 0.25)])
    assert cmds[0] == ["nft", "add", "table", "ip", RADIO_TABLE] and RADIO_TABLE == "mplab_radio"
    drops = [c for c in cmds if c[:3] == ["nft", "add", "rule"] and c[-1] == "drop"]
    assert [r[r.index("oifname") + 1] for r in drops] == ["rx1", "rx3"]
    assert [r[r.index("<") + 1] for r in drops] == ["10000", "2500"]  # of 1000000
    assert [r[r.index("name") + 1] for r in drops] == ["rx1_lost", "rx3_lost"]
    # Every device counts what it is sent, lossless ones too (their loss is measured as 0, not assumed).
    counting = [c for c in cmds if c[:3] == ["nft", "add", "rule"] and c[-1] != "drop"]
    assert [(r[r.index("oifname") + 1], r[-1]) for r in counting] == [("rx1", "rx1_seen"), ("rx2", "rx2_seen"),
                                                                      ("rx3", "rx3_seen")]


def test_radio_loop_parses_proc_net_dev_and_writes_batch_lines():
    text = ("Inter-|   Receive                                                |  Transmit\n"
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls "
            "carrier compressed\n"
            "    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0 "
            "      0          0\n"
            "   rx1: 1234567   900    0    0    0     0          0         0 98765432   70000    0    0    0     0 "
            "      0          0\n")
    assert read_tx_bytes(text) == {"lo": 0, "rx1": 98765432}
    assert htb_rate_line("rx1", 4.6154) == ("class change dev rx1 parent 1: classid 1:1 htb rate 4615kbit "
                                            "ceil 4615kbit quantum 1514")
    cfg = LinkConfig({"wifi": "a", "lte": "e"}, {"wifi": AccessNetwork("dcf", 30), "lte": AccessNetwork(
        "proportional-fair", 50, {1: 40, 2: 35})}, {"wifi": {"n1": ("rx1", 50)}, "lte": {"n1": ("rx1", 45)}}, 0.8)
    back = LinkConfig.from_json(cfg.to_json())
    assert back == cfg
    assert back.solo_rates() == {"wifi": {"n1": 30}, "lte": {"n1": 40}}


# ------------------------------------------------------------------ on the kernel

def _ping(host, dst: str, count: int, interval: str = "0.02") -> tuple[int, float]:
    """(replies received, minimum RTT ms)."""
    out = host.run(["ping", "-n", "-q", "-c", str(count), "-i", interval, "-W", "2", dst], check=False,
                   timeout=60).stdout
    received = int(out.split(" received")[0].rsplit(",", 1)[1].strip()) if " received" in out else 0
    rtt = [line for line in out.splitlines() if "min/avg/max" in line]
    return received, (float(rtt[0].split("=")[1].split("/")[0]) if rtt else float("nan"))


@pytest.mark.root
def test_base_delay_and_loss_act_on_their_own_path_only(prefix):
    from harness.upkeep.clean import clean_prefix
    from harness.testbeds.emulated import EmulatedTestbed

    base = small_inventory(prefix, [(20, 10), (20, 10)]).model_dump(mode="json")
    base["receivers"][0]["interfaces"]["wifi"]["channel"]["delay_ms"] = 40
    base["receivers"][0]["interfaces"]["lte"]["channel"]["loss_pct"] = 30
    tb = EmulatedTestbed(Inventory.model_validate(base))
    try:
        tb.setup([])
        n1, n2 = tb.nodes["n1"], tb.nodes["n2"]
        # The sender's pings to n1 over WiFi wait in the delay line (one way: the reply is not delayed).
        got, rtt = _ping(tb.sender, n1.interfaces["wifi"].address, 5, "0.2")
        assert got == 5 and rtt >= 35, rtt
        got, rtt = _ping(tb.sender, n2.interfaces["wifi"].address, 5, "0.2")
        assert got == 5 and rtt < 35, rtt
        # 30 % loss on n1's LTE downlink: of 100 pings some never come back; n2's LTE loses none.
        got, _ = _ping(tb.sender, n1.interfaces["lte"].address, 100)
        assert got < 95, got
        assert _ping(tb.sender, n2.interfaces["lte"].address, 100)[0] == 100
        rules = tb.enb.run(["nft", "list", "table", "ip", "mplab_radio"]).stdout
        assert 'oifname "rx1" numgen random' in rules and 'oifname "rx2" numgen' not in rules
        # The counters saw those pings and the drops: the random loss alone, per receiver and radio.
        counted = tb.radio_loss_counters()
        assert counted["n1"]["lte"].seen_pkts >= 100 and counted["n1"]["lte"].lost_pkts == 100 - got
        assert counted["n2"]["lte"].seen_pkts >= 100 and counted["n2"]["lte"].lost_pkts == 0
    finally:
        tb.teardown()
        clean_prefix(prefix)


def test_radio_loop_reshares_as_stations_start_and_finish():
    from harness.emulation.radiolink import RadioLoop

    class Pipe:
        def __init__(self):
            self.lines: list[str] = []

        def write(self, text):
            self.lines += text.splitlines()

        def flush(self):
            pass

    class FakeTc:
        def __init__(self):
            self.stdin = Pipe()

    class Loop(RadioLoop):
        counters = {"wifi": {"rx1": 0, "rx2": 0}, "lte": {"rx1": 0, "rx2": 0}}

        def _counters(self, radio):
            return dict(self.counters[radio])

    cfg = LinkConfig({"wifi": "a", "lte": "e"}, {"wifi": AccessNetwork("dcf", 100),
                                                 "lte": AccessNetwork("proportional-fair", 100)},
                     {"wifi": {"n1": ("rx1", 30), "n2": ("rx2", 6)}, "lte": {"n1": ("rx1", 20), "n2": ("rx2", 20)}},
                     hold_s=0.2)
    loop = Loop(cfg)
    loop.tc = {"wifi": FakeTc(), "lte": FakeTc()}
    loop.apply(cfg.solo_rates())
    loop.last_bytes = {r: loop._counters(r) for r in loop.tc}

    def flow(t, **moved):
        for dev, n in moved.items():
            Loop.counters["wifi"][dev] += n
        loop.step(t)
        return {s: round(x, 3) for s, x in loop.current["wifi"].items()}

    assert flow(0.05, rx1=50_000) == {"n1": 30, "n2": 6}             # n1 alone: its own rate
    both = 1 / (1 / 30 + 1 / 6)
    assert flow(0.10, rx1=20_000, rx2=20_000) == {"n1": round(both, 3), "n2": round(both, 3)}  # DCF
    assert flow(0.20, rx2=20_000) == {"n1": round(both, 3), "n2": round(both, 3)}  # n1 quiet < hold_s
    assert flow(0.35, rx2=20_000) == {"n1": 30, "n2": 6}             # n1 finished: n2 alone again
    # Every change went to tc as a class change of the right device.
    assert any(line.startswith("class change dev rx2 ") and "rate 5000kbit" in line
               for line in loop.tc["wifi"].stdin.lines)


def test_equal_fits_are_told_apart_by_term_order_not_by_the_last_bits_of_their_rms():
    # Two 6-term sets that differ only by which extra term was fitted to 0 are the same fit. Their RMS came out
    # a few ulps apart one way or the other from run to run (BLAS threads on a loaded machine), and the
    # shipped inventory's text changed with it: the first set in TERMS order wins a tie, whatever the noise.
    first = (6, 0.0040000000000001, 0.0083, {"P0": 0.0085, "theta_W": 0.0})
    second = (6, 0.004, 0.0083, {"P0": 0.0085, "theta_B": 0.0})
    assert cal._lowest_rms([first, second]) is first
    assert cal._lowest_rms([second, first]) is second
    # A real difference still wins.
    better = (6, 0.0039, 0.0083, {"P0": 0.0085, "theta_L": 0.0})
    assert cal._lowest_rms([first, second, better]) is better
