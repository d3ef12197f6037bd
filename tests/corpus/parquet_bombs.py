"""Small Parquet files that would decode to gigabytes, written without holding that much.

Each generator writes the file the way an attacker would (one stored value repeated by its
row indices, a schema in the footer that asks for another Arrow type, prefix-compressed text),
and returns nothing: the tests read the file with `core.tables` and measure the reader's peak
memory in a child process (`peak_rss_of_reading`).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]

TEXT_TYPES = {
    "string": pa.string(), "large_string": pa.large_string(), "string_view": pa.string_view(),
    "dictionary": pa.dictionary(pa.int32(), pa.string()),
    "large_dictionary": pa.dictionary(pa.int64(), pa.large_string()),
}
"""Arrow types a footer may ask for a Parquet text column to be read as."""

BINARY_TYPES = {
    "binary": pa.binary(), "large_binary": pa.large_binary(), "binary_view": pa.binary_view(),
    "fixed_size_binary": pa.binary(4),
}


def _with_declared_schema(path: Path, table: pa.Table, declared: pa.Schema,
                          **options: object) -> None:
    """Write `table`'s column data, with a footer saying Arrow should read it as `declared`."""
    with pq.ParquetWriter(path, table.schema, store_schema=False, **options) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(
            {b"ARROW:schema": base64.b64encode(declared.serialize().to_pybytes())})


def repeated_text(path: Path, declared: pa.DataType, *, rows: int = 30_000,
                  value_bytes: int = 100_000, binary: bool = False) -> None:
    """One value of `value_bytes` on every row: stored once (about a kilobyte of file), it
    decodes to rows x value_bytes (3 GB by default) as `declared`."""
    value = b"z" * value_bytes if binary else "z" * value_bytes
    column = pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)),
                                            pa.array([value]))
    table = pa.table({"note": column, "y": np.arange(rows) % 7.0})
    declared_schema = pa.schema([("note", declared), ("y", pa.float64())])
    _with_declared_schema(path, table, declared_schema, compression="zstd")


def prefix_compressed_text(path: Path, *, rows: int = 30_000, value_bytes: int = 100_000,
                           batch: int = 500) -> None:
    """The same value on every row in DELTA_BYTE_ARRAY encoding: each row stores only "same
    prefix as the last one", so even the footer's uncompressed sizes are small."""
    value = "z" * value_bytes
    schema = pa.schema([("note", pa.string()), ("y", pa.float64())])
    with pq.ParquetWriter(path, schema, use_dictionary=False, compression="zstd",
                          column_encoding={"note": "DELTA_BYTE_ARRAY"}) as writer:
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            writer.write_table(pa.table({
                "note": pa.array([value] * n), "y": np.arange(start, start + n) % 7.0}),
                row_group_size=rows)


def many_decimals(path: Path, *, rows: int = 20_000, columns: int = 999,
                  declared: pa.DataType | None = None) -> None:
    """A table of zeros stored as decimals: a few hundred kilobytes, 20 million cells, each of
    which pandas would make a Python Decimal object (about 100 bytes)."""
    kind = declared or pa.decimal128(38, 2)
    zeros = pa.array(np.zeros(rows, dtype=np.int64)).cast(kind)
    table = pa.table({**{f"d{i}": zeros for i in range(columns)},
                      "y": np.arange(rows) % 7.0})
    pq.write_table(table, path, compression="zstd")


def stored_bytes(path: Path) -> int:
    """What the footer declares the file's data to be once decompressed."""
    metadata = pq.ParquetFile(path).metadata
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))


MEASURER = """
import json, os, subprocess, sys
argv, env, cwd = json.loads(sys.argv[1])
process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                           cwd=cwd)
stderr = process.stderr.read().decode("utf-8", "replace")
_, status, usage = os.wait4(process.pid, 0)
print(json.dumps([os.waitstatus_to_exitcode(status), stderr, usage.ru_maxrss]))
"""
"""Runs the measured command from a small process of its own: Linux carries the high-water
mark of the address space a child was forked or vforked from into the child's ru_maxrss, so a
command started straight from a pytest worker that had grown (it writes the bombs, among
other tests' work) reported the worker's peak, not its own."""


def peak_rss_of_command(argv: list[str]) -> tuple[int, str, float]:
    """Run a command (with this worktree's code); return its exit status, its stderr and its
    peak resident memory in MiB (ru_maxrss of that one child, from wait4: it sees Arrow's
    allocations, which tracemalloc does not)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", MEASURER, json.dumps([argv, env, str(ROOT)])],
                          capture_output=True, text=True, check=True)
    status, stderr, maxrss_kib = json.loads(done.stdout)
    return status, stderr, maxrss_kib / 1024


def peak_rss_of_upload(path: Path, *, warm_up: Path) -> dict[str, object]:
    """Give `path`'s bytes to the dashboard's upload reader (app.sources.single_upload) in a
    fresh process; return the peak resident memory (MiB) before and after, and the outcome.

    `warm_up` is uploaded first, so imports and first-use allocations are in the baseline.
    """
    script = f"""
import json, resource, sys
from pathlib import Path
from cpdecomp.app.sources import single_upload
from cpdecomp.core.errors import CpdecompError
single_upload("warm.parquet", Path({str(warm_up)!r}).read_bytes())
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
content = Path({str(path)!r}).read_bytes()
before = peak()
try:
    dataset = single_upload({path.name!r}, content)
    outcome = {{"read": list(dataset.patients.shape)}}
except CpdecompError as error:
    outcome = {{"refused": error.reason, "message": str(error)}}
print(json.dumps({{"before": before, "after": peak(), **outcome}}), file=sys.stderr)
"""
    # Started from the small measuring process, like a command: started from this (grown)
    # process, the child's ru_maxrss would begin at this process's peak.
    status, stderr, _ = peak_rss_of_command([sys.executable, "-c", script])
    assert status == 0, stderr[-2000:]
    return json.loads(stderr.strip().splitlines()[-1])
