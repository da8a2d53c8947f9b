"""Text streams parsed once and read ahead: a file's chunks are made on a background thread one chunk ahead of the
pass, a text file's first pass spills its pairs for the later passes, and none of it changes a result, an error
message or the files left behind."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import workbench.partition.streaming.stream as S
from workbench.data.readers import DataFormatError
from workbench.partition.base import get_partitioner
from workbench.partition.streaming import STREAMING_METHODS, EdgeFileStream, stream_partition
from workbench.partition.streaming.generate import write_edge_file

TIMINGS = ("phase_s", "elapsed_s", "edges_per_s", "peak_rss_mb", "rss_start_mb")


def outputs(result) -> dict:
    """Everything a run reports but its timings and memory readings: owners, line parts, the other metrics."""
    out = {k: v for k, v in result.metrics.to_dict().items() if k not in TIMINGS}
    out["owner"] = result.owner.tolist()
    out["line_parts"] = result.line_parts().tolist()
    return out


def spill_files(folder) -> list:
    """The spill files in ``folder`` (the run's kept assignment, ``assign-*.bin``, goes with its result)."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("edges-"))


def read_ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("read-ahead")]


@pytest.fixture(scope="module")
def text_and_npy(tmp_path_factory):
    """The same 6000 lines as a text file and as an (E, 2) int64 .npy."""
    folder = tmp_path_factory.mktemp("read_ahead")
    text = write_edge_file(folder / "g.txt", 800, 6000, seed=4)
    pairs = np.array([[int(x) for x in line.split()] for line in text.read_text().splitlines()], np.int64)
    npy = folder / "g.npy"
    np.save(npy, pairs)
    return text, npy


@pytest.mark.parametrize("method", STREAMING_METHODS)
def test_text_and_binary_streams_give_the_same_partition_in_many_chunks(text_and_npy, tmp_path, monkeypatch,
                                                                         method):
    """Tiny chunks (hundreds of them, the reading thread handing each over): the text file (parsed once, its later
    passes reading the spill) and the .npy give the same owners, line parts and metrics, as do reading in the
    caller's thread and parsing every pass; the spill is read by the later passes and gone after the run."""
    text, npy = text_and_npy
    monkeypatch.setattr(S, "READ_AHEAD", True)   # the default on two cores or more
    names, spill_seen = set(), []
    thread_cls = threading.Thread

    class Recorded(thread_cls):
        def __init__(self, *a, name=None, **k):
            names.add(name)
            super().__init__(*a, name=name, **k)

    read_spill = S.SpilledTextStream._read_spill

    def recorded_read_spill(self):
        spill_seen.append(sorted(p.name for p in self.folder.iterdir() if p.name.startswith("edges-")))
        return read_spill(self)

    monkeypatch.setattr(S.threading, "Thread", Recorded)
    monkeypatch.setattr(S.SpilledTextStream, "_read_spill", recorded_read_spill)

    def run(path, chunk_edges, **options):
        part = get_partitioner(method)(seed=5)
        r = part.stream(EdgeFileStream(path, chunk_edges=chunk_edges), 4, keep_assignment=True,
                        assignment_dir=tmp_path / "tmp", **options)
        try:
            return outputs(r)
        finally:
            r.close()

    want = run(npy, 1 << 20)   # one chunk, the binary reader
    assert run(text, 13) == want                       # ~35 lines a block: ~170 chunks a pass
    assert spill_seen and all(len(s) == 1 for s in spill_seen)
    assert any(n.startswith("read-ahead g.txt") for n in names if n)
    assert run(npy, 29) == want
    assert run(text, 13, spill_text=False) == want
    monkeypatch.setattr(S, "READ_AHEAD", False)
    assert run(text, 13) == want
    assert list((tmp_path / "tmp").iterdir()) == [] and read_ahead_threads() == []


@pytest.mark.parametrize("k_hops", [1, 0])
def test_reading_ahead_changes_no_chunk_and_no_k0_result(text_and_npy, tmp_path, monkeypatch, k_hops):
    """The chunks (a line's place in its chunk decides the K = 0 ablation's random side) are those of reading in
    the caller's thread, for the text, the spill and the binary reader alike."""
    text, npy = text_and_npy
    monkeypatch.setattr(S, "READ_AHEAD", True)
    for path in (text, npy):
        threaded = [(s.copy(), d.copy()) for s, d in EdgeFileStream(path, chunk_edges=50)]
        monkeypatch.setattr(S, "READ_AHEAD", False)
        plain = [(s.copy(), d.copy()) for s, d in EdgeFileStream(path, chunk_edges=50)]
        monkeypatch.setattr(S, "READ_AHEAD", True)
        assert len(threaded) == len(plain) > 50
        assert all((a == c).all() and (b == d).all() for (a, b), (c, d) in zip(threaded, plain)), path
    runs = []
    for ahead in (True, False):
        monkeypatch.setattr(S, "READ_AHEAD", ahead)
        r = get_partitioner("spring")(seed=1).stream(EdgeFileStream(text, chunk_edges=50), 4, k_hops=k_hops,
                                                       keep_assignment=True, assignment_dir=tmp_path)
        runs.append(outputs(r))
        r.close()
    assert runs[0] == runs[1]


def test_the_spill_goes_after_a_failed_run_and_errors_keep_their_message(tmp_path, monkeypatch):
    """A malformed line in a later chunk is raised in the caller with the message of reading in one thread; a
    failure in a later pass (the spill being read) also leaves no spill file and no reading thread behind."""
    lines = [f"{i % 97} {(7 * i) % 89}" for i in range(3000)]
    lines[2500] = "5 -3"
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    messages = []
    for ahead in (True, False):
        monkeypatch.setattr(S, "READ_AHEAD", ahead)
        with pytest.raises(DataFormatError) as info:
            stream_partition(bad, 4, method="spring", chunk_edges=100)
        messages.append(str(info.value))
        with pytest.raises(DataFormatError):
            get_partitioner("hdrf")().stream(EdgeFileStream(bad, chunk_edges=100), 4, assignment_dir=tmp_path / "t")
        assert spill_files(tmp_path / "t") == [] and read_ahead_threads() == []
    assert messages[0] == messages[1] and "line 2501, field 2" in messages[0]

    good = tmp_path / "good.txt"
    good.write_text("\n".join(lines[:2500]) + "\n")
    import workbench.partition.streaming.kernels as K

    def fail(*args):
        raise RuntimeError("completion failed")

    seen = []
    read_spill = S.SpilledTextStream._read_spill

    def recorded_read_spill(self):
        seen.append(len(spill_files(self.folder)))
        return read_spill(self)

    monkeypatch.setattr(S, "READ_AHEAD", True)
    monkeypatch.setattr(S.SpilledTextStream, "_read_spill", recorded_read_spill)
    monkeypatch.setattr(K, "complete_chunk", fail)
    with pytest.raises(RuntimeError, match="completion failed"):
        get_partitioner("dbh")().stream(EdgeFileStream(good, chunk_edges=100), 4, assignment_dir=tmp_path / "f")
    assert seen and seen[0] == 1   # the spill was there while the later passes read it
    assert spill_files(tmp_path / "f") == []
    assert read_ahead_threads() == []


def test_a_pass_stopped_early_ends_its_reading_thread(text_and_npy, tmp_path, monkeypatch):
    """A caller that stops (a break) ends the reading thread and closes the file; a spilled stream's close()
    stops a pass still under way and removes the spill."""
    text, npy = text_and_npy
    monkeypatch.setattr(S, "READ_AHEAD", True)
    for path in (text, npy):
        for s, d in EdgeFileStream(path, chunk_edges=10):
            break
        assert read_ahead_threads() == []
    spill = S.SpilledTextStream(EdgeFileStream(text, chunk_edges=10), tmp_path / "spill")
    it = iter(spill)
    next(it)
    assert len(read_ahead_threads()) == 1 and len(list((tmp_path / "spill").iterdir())) == 1
    spill.close()
    assert read_ahead_threads() == [] and list((tmp_path / "spill").iterdir()) == [] and not spill.spilled
    assert list(it) == []


@pytest.mark.parametrize("ahead", [True, False])
def test_indented_comments_and_blank_lines_across_block_cuts_never_end_the_stream(tmp_path, monkeypatch, ahead):
    """A comment after leading blanks in the middle of the file is skipped, not the end of the stream, and so are
    comment and blank lines longer than a block (the cut falls inside them) and runs of them at a block's edge, in
    the text passes, the spill's and reading in the caller's thread alike."""
    monkeypatch.setattr(S, "READ_AHEAD", ahead)
    rng = np.random.default_rng(7)
    lines, want = [], []
    for i in range(600):
        r = rng.random()
        if r < 0.15:
            lines.append(" " * int(rng.integers(1, 6)) + "# comment " + "x" * int(rng.integers(0, 80)))
        elif r < 0.2:
            lines.append(" " * int(rng.integers(0, 70)))   # a blank line longer than a block
        elif r < 0.25:
            lines.append("\t% " + "y" * int(rng.integers(0, 40)))
        else:
            u, v = (int(x) for x in rng.integers(0, 60, 2))
            want.append((u, v))
            lines.append(f"{u} {v}")
    lines.insert(300, "   # comment in the middle")
    path = tmp_path / "g.txt"
    path.write_text("\n".join(lines) + "\n")
    for chunk_edges in (1, 2, 3, 5, 1000):   # blocks of 16, 32, 48, 80 bytes and the whole file
        got = [pair for s, d in EdgeFileStream(path, chunk_edges=chunk_edges)
               for pair in zip(s.tolist(), d.tolist())]
        assert got == want, chunk_edges
    spill = S.SpilledTextStream(EdgeFileStream(path, chunk_edges=2), tmp_path / "spill")
    for _ in range(3):
        assert [pair for s, d in spill for pair in zip(s.tolist(), d.tolist())] == want
    assert spill.spilled
    spill.close()
    for method in STREAMING_METHODS:
        assert stream_partition(path, 3, method=method, chunk_edges=3).metrics.num_lines == len(want), method
