"""Streaming partitioners' memory is bounded by the vertices and the chunk size, never by the lines.

Two views: the allocations Python and numpy make during a run, traced exactly in this process (they must not
grow with the file, and for the one-pass vertex-cut methods stay within the state, the owners and a few chunks);
and the peak RSS of the ``workbench partition --stream`` command in a subprocess above the same command on a
16-line file, through ``benchmarks/streaming.py`` (pandas' tokenizer and the allocator's retained pages show only
there). Before the fix a 1.5M-line file with 524288-line chunks peaked 86 MiB above the 16-line run (a block went
through six copies and pandas' buffers; the completion pass made four ``(N,)`` temporaries), now 22 MiB.
"""

from __future__ import annotations

import gzip
import importlib.util
import sys
import tracemalloc
from pathlib import Path

import pytest

from workbench.partition.streaming import STREAMING_METHODS, stream_partition
from workbench.partition.streaming.generate import write_edge_file

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "streaming.py"
CHUNK = 1 << 13   # lines per chunk: 128 KiB text blocks, so a few chunks stand out against the state
ONE_PASS = ("hash", "dbh", "greedy", "hdrf")   # one assignment pass (DBH's degree pass allocates nothing)


@pytest.fixture(scope="module")
def chung_lu(tmp_path_factory):
    """A seeded Chung-Lu edge file of 100k lines over 30k ids, and the same lines twice (the same vertices)."""
    folder = tmp_path_factory.mktemp("memory")
    once = write_edge_file(folder / "once.txt", 30_000, 100_000, num_blocks=1, homophily=0.0, seed=0)
    twice = folder / "twice.txt"
    twice.write_bytes(once.read_bytes() * 2)
    return once, twice


def traced_peak(path, method: str):
    """Peak bytes of Python and numpy allocations while ``method`` streams ``path`` (assignment kept)."""
    tracemalloc.start()
    try:
        result = stream_partition(path, 8, method=method, chunk_edges=CHUNK, keep_assignment=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    result.close()
    return peak, result.metrics


@pytest.mark.parametrize("method", STREAMING_METHODS)
def test_traced_memory_does_not_grow_with_the_file(chung_lu, method):
    once, twice = chung_lu
    stream_partition(once, 8, method=method, chunk_edges=CHUNK)   # kernels loaded outside the trace
    small, m_small = traced_peak(once, method)
    big, m = traced_peak(twice, method)
    chunk_bytes = 16 * CHUNK
    assert m.num_lines == 2 * m_small.num_lines > 190_000 and m.num_nodes == m_small.num_nodes <= 30_000
    # Twice the lines: not a byte more than a quarter chunk (2 bytes a line kept would be 200 KiB more).
    assert big <= small + chunk_bytes // 4, (method, small, big)
    if method in ONE_PASS:   # the passes' state, the owners and the buffers of the chunks: a text block, two
        # chunks of ids in flight (the pass's and the one read ahead on the reading thread), parts, the spill's pairs
        assert big <= m.state_bytes + 8 * m.num_nodes + 5 * chunk_bytes, (method, big, m.state_bytes)


def pandas_chunks(path: Path, chunk_edges: int) -> list:
    """The chunks the reader made before the compiled parser: ``line_blocks`` + pandas, one chunk a block."""
    import pandas as pd

    from workbench.data.readers import _EdgeListState, _parse_block, line_blocks

    state, out = _EdgeListState(path=path, num_nodes=None), []
    with open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
        for data in line_blocks(stream, 16 * chunk_edges, "EdgeFileStream", path):
            _parse_block(pd, data, state)
            if state.src:
                out.append((state.src.pop().tolist(), state.dst.pop().tolist()))
    return out


@pytest.mark.parametrize("text", [
    "# u v\n0 1\n1,2\r\n2\t3 # a comment\n\n   \n% another\n3  ,4\n 4 5\t\n5 0",   # the plain form, no final newline
    "0 1 0.5\n1 2 1.5\n2 3 2\n" * 3,                                               # weights: pandas reads them
    "10 11\n" * 5 + "7 +8\n" + "1 2\n" * 5,                                         # a sign: pandas' block
])
@pytest.mark.parametrize("gz", [False, True])
def test_compiled_parser_gives_the_chunks_of_the_pandas_reader(tmp_path, text, gz):
    """The reused-buffer reader cuts the same blocks as ``line_blocks`` (chunk boundaries matter to the K = 0
    completion's random side) and reads the same ids, handing anything outside the plain form to pandas."""
    from workbench.partition.streaming import EdgeFileStream

    path = tmp_path / ("e.txt.gz" if gz else "e.txt")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    for chunk_edges in (1, 2, 3, 1000):
        got = [(s.tolist(), d.tolist()) for s, d in EdgeFileStream(path, chunk_edges=chunk_edges)]
        assert got == pandas_chunks(path, chunk_edges), chunk_edges


def test_compiled_parser_leaves_errors_to_the_full_parser(tmp_path):
    """An indented comment is a comment line to both parsers (pandas alone would read a row of missing values:
    the full parser takes the blanks off first); a negative id is refused with its line and field."""
    from workbench.data.readers import DataFormatError
    from workbench.partition.streaming import EdgeFileStream

    path = tmp_path / "e.txt"
    path.write_text("0 1\n  # indented\n1 2\n")
    new = [(s.tolist(), d.tolist()) for s, d in EdgeFileStream(path)]
    assert new == pandas_chunks(path, 1 << 20) == [([0, 1], [1, 2])]
    path.write_text("0 1\n1 -2\n")
    with pytest.raises(DataFormatError, match="line 2, field 2"):
        list(EdgeFileStream(path))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS of a child through wait4 (Linux)")
def test_cli_peak_rss_is_the_state_and_a_few_chunks(tmp_path):
    """``workbench partition FILE --parts 8 --method hdrf --stream --json`` on 1.5M lines over 250k ids, chunks of
    2^19 lines (8 MiB of text): at most the state, three chunks and 8 MiB above the 16-line file (22 MiB here;
    86 MiB before the fix)."""
    spec = importlib.util.spec_from_file_location("streaming_benchmark", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.cli_memory(tmp_path, lines=1_500_000, nodes=250_000, parts=8, method="hdrf", chunk_edges=1 << 19)
    assert out["lines"] > 1_400_000 and out["nodes"] == 250_000
    bound = out["state_mb"] + 3 * out["chunk_mb"] + 8
    assert max(out["above_tiny_mb"], out["run_above_tiny_mb"]) <= bound, out
