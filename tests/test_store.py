"""The campaign store: atomic appends, crash repair, versions, locking."""
from __future__ import annotations

import json
import os

import pytest

from harness.errors import Busy, ConfigError, StoreError
from harness.campaign.store import SCHEMA_VERSION, Campaign


def rec(sid: str, rx: str) -> dict:
    return {"schema_version": SCHEMA_VERSION, "sample_id": sid, "receiver": rx}


def test_create_append_reopen(tmp_path):
    c = Campaign.create(tmp_path, "c1", {"plan": ["a", "b"]})
    c.append([rec("a", "n1"), rec("a", "n2")])
    again = Campaign.open(tmp_path / "c1")
    assert again.manifest["plan"] == ["a", "b"] and again.id == "c1"
    assert [r["receiver"] for r in again.records()] == ["n1", "n2"]
    assert again.completed() == {"a"}
    with pytest.raises(StoreError, match="already exists"):
        Campaign.create(tmp_path, "c1", {})
    with pytest.raises(StoreError, match="refusing"):
        c.append([])


def test_torn_tail_is_cut_aside_and_sample_reruns(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": []})
    c.append([rec("a", "n1")])
    with open(c.samples_path, "ab") as f:
        f.write(b'{"schema_version": 1, "sample_id": "b", "rec')  # crash inside the write
    assert c.completed() == {"a"}
    done = c.repair()
    assert any("torn" in d for d in done)
    assert c.samples_path.read_bytes().endswith(b"\n")
    torn = list(tmp_path.glob("c/samples.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes().startswith(b'{"schema_version": 1, "sample_id": "b"')
    c.append([rec("b", "n1")])
    assert [r["sample_id"] for r in c.records()] == ["a", "b"]


def test_unfinished_raw_output_is_moved_aside_not_deleted(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": []})
    d = c.partial_dir("a")
    (d / "iperf3-n1.json").write_text("{}")
    c.commit_raw("a")
    c.append([rec("a", "n1")])
    p = c.partial_dir("b")
    (p / "iperf3-n1.json").write_text("partial")
    c.commit_raw("b")  # crash between commit_raw and append: raw without records
    orphan = c.partial_dir("c")
    (orphan / "x").write_text("y")
    done = c.repair()
    assert len(done) == 2
    assert (c.path / "raw" / "a" / "iperf3-n1.json").exists()
    aborted = sorted(p.name for p in (c.path / "raw" / ".aborted").iterdir())
    assert len(aborted) == 2 and aborted[0].startswith("b-") and aborted[1].startswith("c-")
    assert not (c.path / "raw" / "b").exists()


def test_newer_versions_are_refused(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": []})
    c.append([{"schema_version": SCHEMA_VERSION + 1, "sample_id": "a"}])
    with pytest.raises(StoreError, match="newer"):
        c.records()
    mf = c.path / "manifest.json"
    doc = json.loads(mf.read_text())
    doc["schema_version"] = SCHEMA_VERSION + 1
    mf.write_text(json.dumps(doc))
    with pytest.raises(StoreError, match="upgrade mplab"):
        Campaign.open(c.path)
    with pytest.raises(ConfigError, match="not a campaign directory"):
        Campaign.open(tmp_path / "nothing")  # a wrong argument is bad input (exit 2), not a damaged store
    mf.unlink()
    with pytest.raises(StoreError, match="without its manifest.json"):
        Campaign.open(c.path)  # the campaign's records are there: the store is damaged (exit 4)


def test_corrupt_middle_line_is_an_error_not_silence(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": []})
    c.append([rec("a", "n1")])
    with open(c.samples_path, "ab") as f:
        f.write(b"garbage\n")
    with pytest.raises(StoreError, match=r"samples.jsonl:2: corrupt record"):
        c.records()


def test_one_runner_per_campaign(tmp_path):
    c = Campaign.create(tmp_path, "c", {"plan": []})
    other = Campaign.open(c.path)
    with c.lock():
        with pytest.raises(Busy, match=f"another process \\(pid {os.getpid()}\\)"):
            with other.lock():
                pass
    with other.lock():
        pass


def test_lock_files_name_their_holder_only_while_held(tmp_path):
    """harness.files lock helpers (the campaign lock and the prefix claims use them)."""
    from harness.files import held_lock_text, try_flock, write_lock_text

    path = tmp_path / "x.lock"
    assert held_lock_text(path) is None  # no file: nobody holds it
    fd = try_flock(path)
    assert fd is not None
    write_lock_text(fd, "longer text first\n")
    write_lock_text(fd, "owner 1\n")  # replaces, no stale tail
    try:
        assert try_flock(path) is None  # a second open file is refused, even in this process
        assert held_lock_text(path) == "owner 1\n"
    finally:
        os.close(fd)
    assert held_lock_text(path) is None  # the kernel dropped it with the descriptor
    fd = try_flock(path)
    assert fd is not None
    os.close(fd)


def test_a_claim_taken_while_someone_peeks_at_the_holder_is_not_refused(tmp_path):
    # `held_lock_text` (used by `mplab clean` and --resume to name a holder) takes a shared lock for an
    # instant; a claim attempted in that instant used to be refused as Busy, naming no live holder.
    import fcntl
    import threading

    from harness.upkeep.claim import PrefixClaim

    claim = PrefixClaim("mplab-peek-", "test", root=tmp_path)
    path = claim.path
    path.write_text("")
    peek = os.open(path, os.O_RDONLY)
    fcntl.flock(peek, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a reader is looking right now
    threading.Timer(0.03, os.close, (peek,)).start()  # ... and lets go 30 ms later
    claim.acquire()
    try:
        assert claim.held
    finally:
        claim.release()
