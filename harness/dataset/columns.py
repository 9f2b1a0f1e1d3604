"""The dataset's columns: which are integers, floats and categories, and each one's unit and meaning.

One place for what docs/dataset.md says for people: the builder (``harness.dataset.build``) types
the table with it, the Parquet file carries it as field metadata, and the card and the Croissant
file describe the columns from it. ``COLUMN_DOCS`` is in the table's column order (the builder
checks that it lists exactly ``DatasetRow``'s fields).
"""
from __future__ import annotations

INT_COLUMNS = ("n_receivers", "sample_index", "wifi_bytes", "lte_bytes", "bytes")
FLOAT_COLUMNS = ("wifi_throughput_mbit", "lte_throughput_mbit", "throughput_mbit", "duration_s", "energy_j",
                 "mean_power_w", "tail_energy_j", "energy_edge_j")
#: Text columns with few distinct values: categorical (dictionary-encoded) in the Parquet file.
CATEGORICAL_COLUMNS = ("campaign", "case_id", "cc", "mode", "receiver", "split", "meter_kind", "energy_source",
                       "testbed_kind", "kernel", "cc_impl")

#: column -> (unit, description): the one place columns are documented (Parquet field metadata,
#: Croissant fields, the card); docs/dataset.md says the same for people.
COLUMN_DOCS: dict[str, tuple[str, str]] = {
    "campaign": ("", "campaign id (runs/<campaign>)"),
    "sample_id": ("", "sample id, stable across resumes; every receiver of a sample shares it"),
    "case_id": ("", "case id: congestion control, receiver count and mode"),
    "cc": ("", "congestion control (e.g. cubic, lia, olia, balia, wvegas)"),
    "n_receivers": ("receivers", "receivers transferring at once in the case"),
    "mode": ("", "interfaces in use: wifi, lte or both (MPTCP over both)"),
    "sample_index": ("", "index of the sample within its case, from 1"),
    "receiver": ("", "receiver name in the inventory"),
    "split": ("", "train or test; per case and per sample"),
    "wifi_bytes": ("bytes", "bytes (rx + tx) on the WiFi interface during the transfer"),
    "lte_bytes": ("bytes", "bytes (rx + tx) on the LTE interface during the transfer"),
    "wifi_throughput_mbit": ("Mbit/s", "WiFi interface throughput over the transfer"),
    "lte_throughput_mbit": ("Mbit/s", "LTE interface throughput over the transfer"),
    "bytes": ("bytes", "bytes received by iperf3"),
    "throughput_mbit": ("Mbit/s", "total goodput reported by iperf3"),
    "duration_s": ("s", "transfer duration"),
    "energy_j": ("J", "receiver energy over the transfer window (the target); the radio tail after it is not included"),
    "mean_power_w": ("W", "mean receiver power over the transfer window"),
    "tail_energy_j": ("J", "energy from the end of the transfer window until the receiver was idle again "
                           "(empty for campaigns that did not record it)"),
    "energy_edge_j": ("J", "how much of energy_j rests on where the power changed inside the meter readings that "
                           "straddle the window's edges: its resolution (empty for campaigns that did not record it)"),
    "meter_kind": ("", "energy meter driver (e.g. um25c, ina219, emulated-um25c)"),
    "energy_source": ("", "measured, emulated or synthetic"),
    "testbed_kind": ("", "lab, emulated or synthetic"),
    "kernel": ("", "receiver kernel release"),
    "cc_impl": ("", "congestion control implementation (kernel module, BPF object, ...)"),
    "flags": ("", "'; '-joined measurement flags (empty unless built with --keep-flagged)"),
}
