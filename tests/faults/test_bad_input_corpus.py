"""The bad-input corpus (rigs/bad_input.py): every kind refused with its exit code and words, no traceback,
nothing created, within the issue's bounds (peak memory, and CPU time: wall time on a loaded machine is
the bench's to print, bench/bad_inputs.py)."""
from __future__ import annotations

import pytest

from rigs.bad_input import MAX_MB, MAX_SECONDS, corpus, run_case

CASES = corpus()


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_bad_input_is_refused_with_its_code_and_words_and_nothing_created(case, tmp_path):
    o = run_case(case, tmp_path / "case")
    wrong = o.failures(case, bounds=False)
    assert not wrong, f"{case.kind}: {wrong}\nstdout: {o.stdout[-1500:]}\nstderr: {o.stderr[-3000:]}"
    if case.refusal:
        # Loose on purpose (the bound is 2 s of wall time; CPU time is what this process alone spent).
        assert o.peak_mb <= MAX_MB, f"{case.kind}: {o.peak_mb:.0f} MB"
        assert o.cpu_s <= 2 * MAX_SECONDS, f"{case.kind}: {o.cpu_s:.1f} s of CPU"


def test_the_corpus_has_one_case_per_kind():
    assert len({c.kind for c in CASES}) == len(CASES) >= 150
