"""What writing OFRecord and OneRec files have in common: a file of records written whole
or one record at a time, and a data set's records cut into part files. Each format says
how one record is encoded (``encode``: record -> the bytes it takes in the file)."""
from __future__ import annotations

import os
from typing import Callable, Iterable

import numpy as np

__all__ = ["write_file", "RecordFileWriter", "consecutive_parts"]


def write_file(path, records: Iterable, encode: Callable[[object], bytes]) -> int:
    """Write ``encode(record)`` of each record to ``path``; returns how many. The file
    appears whole: written to a temporary name, then renamed."""
    path = os.fspath(path)
    count = 0
    partial = path + ".partial"
    with open(partial, "wb") as out:
        for record in records:
            out.write(encode(record))
            count += 1
    os.replace(partial, path)
    return count


class RecordFileWriter:
    """Writes records one at a time into one file (a context manager); a format's writer
    sets ``encode``."""

    @staticmethod
    def encode(record) -> bytes:
        raise NotImplementedError

    def __init__(self, path):
        self.path = os.fspath(path)
        self._out = open(self.path, "wb")

    def write(self, record) -> None:
        self._out.write(self.encode(record))

    def close(self) -> None:
        self._out.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def consecutive_parts(records: list, parts: int, what: str) -> list[list]:
    """``records`` cut into ``parts`` runs of consecutive records whose sizes differ by
    at most one (the part files of a data set)."""
    if isinstance(parts, bool) or not isinstance(parts, int) or parts < 1:
        raise ValueError(f"{what}: the number of files must be a positive int, got {parts!r}")
    if len(records) < parts:
        raise ValueError(f"{what}: {len(records)} records cannot fill {parts} part files")
    bounds = np.linspace(0, len(records), parts + 1).round().astype(int)
    return [records[start:stop] for start, stop in zip(bounds[:-1], bounds[1:])]
