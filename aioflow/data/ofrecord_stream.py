"""The records an ``ofrecord_reader`` (or ``onerec_reader``) hands out, batch after batch,
as OneFlow's readers did (``user/data/ofrecord_dataset.h``, ``onerec_dataset.h`` and their
shuffle and batch stages):

* the part files are read in order, record after record, and again from the first when
  the last ends: the stream never ends, epochs follow each other;
* ``shuffle_after_epoch``: from the second epoch on, each epoch reads the part files in a
  new random order (OneRec's reader, ``shuffle_first_epoch``: from the first);
* ``random_shuffle``: records pass through a buffer of ``shuffle_buffer_size``; each
  record handed out is drawn at random from it and its place refilled from the files;
* ``batch_size`` consecutive records (after shuffling) make a batch;
* ``shuffle_batches`` (OneRec's ``shuffle_mode="batch"``): batches of consecutive records
  are drawn at random from a buffer of ``shuffle_buffer_size`` batches instead.

The file format is the caller's: ``read`` yields the raw records of one file, ``parse``
turns one into what the decoders take (OFRecord's by default).

Randomness comes from ``seed`` (aioflow's addition), else from ``flow.random.seed(n)``
when it was called, else from fresh entropy.
"""
from __future__ import annotations

import itertools
import os
from typing import Iterator

import numpy as np

from .._core import seeds
from .job_feeds import FeedSource
from .ofrecord import parse_record, read_records


_OFRECORD_HINT = "check ofrecord_dir, data_part_num, part_name_prefix and part_name_suffix_length"


class RecordStream:
    """Endless batches (lists of parsed records) from ``paths``."""

    def __init__(self, paths, batch_size: int, random_shuffle: bool = False,
                 shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False,
                 seed=None, what: str = "flow.data.ofrecord_reader", *,
                 shuffle_batches: bool = False, shuffle_first_epoch: bool = False,
                 read=read_records, parse=parse_record, hint: str = _OFRECORD_HINT):
        _positive(what, "batch_size", batch_size)
        _positive(what, "shuffle_buffer_size", shuffle_buffer_size)
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(
                f"{what}: no part file {missing[0]} ({len(missing)} of {len(paths)} missing; "
                f"{hint})")
        if not any(os.path.getsize(p) for p in paths):
            raise ValueError(f"{what}: the part files {paths} hold no records")
        self.paths = list(paths)
        self.batch_size = batch_size
        self.random_shuffle = bool(random_shuffle)
        self.shuffle_buffer_size = shuffle_buffer_size
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.shuffle_batches = bool(shuffle_batches)
        self.first_shuffled_epoch = 0 if shuffle_first_epoch else 1
        self.read = read
        self.parse = parse
        self.seed = seeds.loader_seed() if seed is None else seed

    def first_record(self):
        """The first record of the first part file (trace-time shape inference)."""
        for path in self.paths:
            for data in self.read(path):
                return self._parsed((path, 0, data))
        raise ValueError(f"the part files {self.paths} hold no records")

    def _parsed(self, item):
        """``parse`` of one ``(path, index, data)``; its ValueError names the file and the
        record (the bytes come from files users download: untrusted)."""
        path, index, data = item
        try:
            return self.parse(data)
        except ValueError as err:
            if str(err).startswith(f"{path}, record "):   # named already
                raise
            raise type(err)(f"{path}, record {index}: {err}") from None

    def batches(self) -> Iterator[list]:
        rng = np.random.default_rng(self.seed)
        records = self._records(rng)
        if self.random_shuffle and not self.shuffle_batches:
            records = _buffer_shuffle(records, self.shuffle_buffer_size, rng)
        batches = iter(lambda: list(itertools.islice(records, self.batch_size)), None)
        if self.random_shuffle and self.shuffle_batches:
            batches = _buffer_shuffle(batches, self.shuffle_buffer_size, rng)
        for batch in batches:
            yield [self._parsed(item) for item in batch]

    def _records(self, rng) -> Iterator[tuple[str, int, bytes]]:
        """``(path, index in its file, bytes)`` of every record, epoch after epoch."""
        order = list(self.paths)
        for epoch in itertools.count():
            if self.shuffle_after_epoch and epoch >= self.first_shuffled_epoch:
                order = [order[i] for i in rng.permutation(len(order))]
            for path in order:
                for index, data in enumerate(self.read(path)):
                    yield path, index, data


class ReaderBatch:
    """What a reader returns inside a job: each step, ``batch_size`` records of its
    ``stream``. Not a blob: give it to the reader's decoders, which return blobs (hidden
    placeholders of the job fed by ``source``). A reader's subclass names the reader."""

    reader = "a reader"

    def __init__(self, graph, stream: RecordStream, name: str):
        self.stream = stream
        self.name = name
        self.batch_size = stream.batch_size
        self.shape = (stream.batch_size,)
        self.source = FeedSource(graph, stream.batches, f"{self.reader} {name!r}")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name}: {self.batch_size} records of "
                f"{self.stream.paths}>")


def _buffer_shuffle(items: Iterator, size: int, rng) -> Iterator:
    """Each item handed out is drawn at random from a buffer of ``size`` and its place
    refilled with the next (records, or whole batches)."""
    buffer = list(itertools.islice(items, size))
    for item in items:
        index = int(rng.integers(len(buffer)))
        yield buffer[index]
        buffer[index] = item


def _positive(what: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what}: {name} must be a positive int, got {value!r}")
