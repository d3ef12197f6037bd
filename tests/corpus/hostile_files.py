"""Crafted files that must be refused, with the reason each refusal must give: one list that
the command line (tests/test_hostile_input.py) and the dashboard's Data page
(tests/app/test_hostile_upload.py) are both run over.

Each entry is (file name, bytes, a phrase the one-line refusal must contain). No message may
quote a cell: the headerless file's first row carries SECRET_CELLS.
"""

from __future__ import annotations

import io
import os
import pickle

import pyarrow as pa
import pyarrow.parquet as pq

from corpus.parquet_lies import LYING_FILES, SMALL_LIES, lying_bytes

SECRET_CELLS = ("P001", "Q7-SECRET")
"""Cell values of the headerless file that no refusal may quote."""


def parquet_bytes(table: pa.Table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def wide_csv(columns: int) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    return (header + "\n" + ",".join(["1"] * columns) + "\n").encode()


HOSTILE = [
    ("picture.csv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(300), "PNG image"),
    ("workbook.csv", b"PK\x03\x04\x14\x00\x06\x00" + os.urandom(300), "ZIP archive"),
    ("noise.csv", b"a,b\n" + bytes(range(128, 256)) * 8, "not UTF-8 text: line 2"),
    ("latin1.csv", "x1,y\n1,Größe\n".encode("latin-1"), "not UTF-8 text: line 2"),
    ("pickle.csv", pickle.dumps({"a": 1}, protocol=4), "Python pickle"),
    ("dup.csv", b"x1,x2,x1,outcome\n1,2,3,4\n", "columns 1 and 3 have the same name"),
    ("headerless.csv", b"P001,Q7-SECRET,72.5,1.3\nP002,B,60.1,2.2\n",
     "line 1 looks like a row of data, not column names (column 3 is a number)"),
    ("blank.csv", b"x1,,outcome\n1,2,3\n", "column 2 has no name"),
    ("ragged.csv", b"x1,outcome\n1,2,3\n", "more fields than the header"),
    ("wide.csv", wide_csv(5000), "5,000 columns; the limit is 1,000"),
    ("bomb.csv", b"x1,outcome\n1," + b"7" * (3 * 2**20) + b"\n", "field longer than 131,072"),
    ("longname.csv", b'"' + b"n" * 100_000 + b'",outcome\n1,2\n',
     "column 1 has a name longer than 1,000 characters"),
    ("longname.parquet", parquet_bytes(pa.table({"n" * 5_000: [1.0], "outcome": [2.0]})),
     "column 1 has a name longer than 1,000 characters"),
    ("junk.parquet", b"not parquet at all" * 10, "not a readable Parquet file"),
    ("nested.parquet", parquet_bytes(pa.table({"a": [[1], [2]], "outcome": [1.0, 2.0]})),
     "column 'a' holds list"),
    ("wide.parquet", parquet_bytes(pa.table({f"c{i}": [1.0] for i in range(1200)})),
     "1,200 columns; the limit is 1,000"),
    *((f"lie-{n}.parquet", lying_bytes(kind), LYING_FILES[kind][1])
      for n, kind in enumerate(SMALL_LIES)),
]
