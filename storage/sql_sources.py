"""Where `distrl sql` reads S3 shards from: a pyarrow dataset over byte ranges, so that a query
downloads the columns it names and not the screenshots beside them.

DuckDB reading S3 shards itself, through the registered s3fs filesystem, downloaded the shards
whole one to four times over for a `count(*)` (s3fs reads ahead up to 50 MB on a file's first
read, and DuckDB's external file cache keeps what it likes); with byte ranges instead, its many
small GETs per query made queries 10x slower. Registering a pyarrow dataset as the views' source
hands DuckDB's projection (and filters) to pyarrow, whose Parquet reader fetches only the named
column chunks, coalesced (`pre_buffer`), one ranged GET each; what a session downloaded is kept
(`RangeCache`, bounded) for its later queries.

Each shard's footer is fetched once, when the session checks it, parsed into its fragment, and
dropped; only the footer's own bytes are fetched (`FooterGuess`), not the last 64 KiB that pyarrow
reads to find one (with a screenshot per step that was 13x the footers' bytes, mostly images).
Column chunks are fetched exactly: ranges are merged only where they touch (`SCAN_CACHE`), since
pyarrow's default also fetched the unnamed columns in gaps of up to 8 KiB between named ones (2-5x
the named chunks' bytes). The file each row came from is the `filename` column, a partition value
of its fragment (nothing is read for it), as DuckDB's `filename=true` gives it.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyarrow.fs import FSSpecHandler, PyFileSystem

from storage.schema import STEP_SCHEMA

# pyarrow reads this much of a file's end to find its footer (parquet's default footer read size,
# not settable from Python): a shard opened for its footer answers that read from the footer it holds.
FOOTER_READ_BYTES = 64 * 1024
# A Parquet file ends with the footer's length (4 bytes, little-endian) and the magic b"PAR1".
_TRAILER_BYTES = 8
_MAGIC = b"PAR1"
# The first footers of a session are fetched from a small guess (a second GET for the rest); later
# ones from the largest footer seen plus an eighth: shards of one schema have footers within a few %.
FIRST_FOOTER_GUESS = 2 * 1024
# Ranges of one scan are merged only when they touch: a gap is other columns' bytes, and a shard's
# named chunks are often a few hundred bytes between unnamed ones as large (pyarrow's default 8 KiB
# gaps fetched 1.1-5x the named bytes). The price is a GET per run of adjacent named chunks (`tasks`:
# 5 a shard instead of 3), issued concurrently on pyarrow's I/O threads (`bench/sql_s3_reads.py`).
SCAN_CACHE = pa.CacheOptions(hole_size_limit=0, range_size_limit=32 * 1024 * 1024, lazy=True)
FILENAME_COLUMN = "filename"
SHARD_ROWS_SCHEMA = STEP_SCHEMA.append(pa.field(FILENAME_COLUMN, pa.string()))


class RangeCache:
    """Byte ranges this session downloaded, kept up to `limit` bytes (then no more are kept): a
    query repeated, or one naming some of the same columns, reads what it shares from memory."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self._ranges: dict[str, list[tuple[int, bytes]]] = {}
        self._lock = threading.Lock()

    def prefix(self, path: str, start: int, end: int) -> bytes:
        """The longest kept run of [start, end) that begins at `start` (empty if none does)."""
        best = b""
        with self._lock:
            for first, data in self._ranges.get(path, ()):
                if first <= start < first + len(data):
                    piece = data[start - first : end - first]
                    best = piece if len(piece) > len(best) else best
        return best

    def next_start(self, path: str, start: int, end: int) -> int:
        """Where the first kept range inside (start, end) begins, or `end`: what to fetch from
        `start` (a range that `prefix` found nothing at) so as not to fetch kept bytes again."""
        with self._lock:
            return min((first for first, _ in self._ranges.get(path, ()) if start < first < end), default=end)

    def put(self, path: str, start: int, data: bytes) -> None:
        with self._lock:
            if self.size + len(data) <= self.limit:
                self._ranges.setdefault(path, []).append((start, data))
                self.size += len(data)


def footer_bytes(tail: bytes) -> int | None:
    """How many bytes at a Parquet file's end are its footer (metadata, length, magic), read from
    its last bytes `tail`; None if they do not end like a Parquet file."""
    if len(tail) < _TRAILER_BYTES or tail[-4:] != _MAGIC:
        return None
    return int.from_bytes(tail[-_TRAILER_BYTES:-4], "little") + _TRAILER_BYTES


class FooterGuess:
    """How many bytes to fetch from a shard's end to get its footer in one GET: `FIRST_FOOTER_GUESS`
    until a footer is seen, then the largest seen plus an eighth."""

    def __init__(self) -> None:
        self.bytes = FIRST_FOOTER_GUESS
        self._lock = threading.Lock()

    def saw(self, footer: int) -> None:
        with self._lock:
            self.bytes = max(self.bytes, footer + footer // 8)


class ShardFile(io.RawIOBase):
    """A read-only shard on a ranged filesystem whose last bytes (`tail`) are already in memory:
    reads inside the tail cost nothing, others come from `cache` or are one ranged GET each.

    A shard opened for its footer (a `tail` that holds the whole footer) answers pyarrow's footer
    read (the file's last `FOOTER_READ_BYTES`) without fetching what lies before the footer: pyarrow
    takes the footer from that read's end and never looks at the rest, so it is zeros here."""

    def __init__(
        self,
        fs: fsspec.AbstractFileSystem,
        path: str,
        size: int,
        tail: bytes,
        cache: RangeCache | None = None,
    ) -> None:
        super().__init__()
        self._fs, self._path, self._size, self._tail, self._cache = fs, path, size, tail, cache
        self._tail_start = size - len(tail)
        footer = footer_bytes(tail)
        self._holds_footer = footer is not None and footer <= len(tail)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def size(self) -> int:
        return self._size

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        data = self._fetch(self._pos, end)
        self._pos += len(data)
        return data

    def _fetch(self, start: int, end: int) -> bytes:
        if start >= self._tail_start:
            return self._tail[start - self._tail_start : end - self._tail_start]
        if self._holds_footer and end == self._size and end - start <= FOOTER_READ_BYTES:
            return bytes(self._tail_start - start) + self._tail  # pyarrow's footer read: see the class
        if self._cache is None:
            return self._get(start, end)
        # A scan's ranges are one or more touching column chunks; a view that scans the shards
        # twice (`step_rows` joins them with themselves) asks for a chunk once alone and once merged
        # with its neighbours: what the session already holds is not fetched again.
        pieces, pos = [], start
        while pos < end:
            piece = self._cache.prefix(self._path, pos, end)
            if not piece:
                piece = self._get(pos, self._cache.next_start(self._path, pos, end))
                if not piece:
                    break  # past the end of the file
                self._cache.put(self._path, pos, piece)
            pieces.append(piece)
            pos += len(piece)
        return b"".join(pieces)

    def _get(self, start: int, end: int) -> bytes:
        data: bytes = self._fs.cat_file(self._path, start=start, end=end)
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer) -> int:  # type: ignore[no-untyped-def,override]
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class _ShardHandler(FSSpecHandler):
    """`fs` for pyarrow, opening a listed shard from its known size and fetched tail (no HEAD
    request, no second footer download); anything else as fsspec does."""

    def __init__(
        self, fs: fsspec.AbstractFileSystem, sizes: dict[str, int], tails: dict[str, bytes], cache: RangeCache
    ) -> None:
        super().__init__(fs)
        self._sizes, self._tails, self._cache = sizes, tails, cache

    def open_input_file(self, path: str) -> pa.NativeFile:
        size = self._sizes.get(path)
        if size is None:
            return super().open_input_file(path)
        tail = self._tails.get(path, b"")
        return pa.PythonFile(ShardFile(self.fs, path, size, tail, self._cache), mode="r")


class RangedShards:
    """S3 shards as pyarrow fragments whose footers are parsed once, from one ranged GET each.

    `footer` fetches a shard's tail (for the caller's checks), `add` makes its fragment and parses
    the footer from that tail, then drops the tail: a fragment keeps its parsed footer, so no later
    scan downloads it again, and memory holds parsed footers, not 64 KiB per shard.
    """

    def __init__(self, fs: fsspec.AbstractFileSystem, cache_bytes: int) -> None:
        self._sizes: dict[str, int] = {}
        self._tails: dict[str, bytes] = {}  # until the shard's footer is parsed
        self.cache = RangeCache(cache_bytes)
        self._filesystem = PyFileSystem(_ShardHandler(fs, self._sizes, self._tails, self.cache))
        self._format = ds.ParquetFileFormat(  # a column chunk's pages in one GET, no gaps
            default_fragment_scan_options=ds.ParquetFragmentScanOptions(
                pre_buffer=True, cache_options=SCAN_CACHE
            )
        )
        self._fs = fs
        self._fragments: dict[str, ds.Fragment] = {}
        self.footer_guess = FooterGuess()

    def footer(self, path: str, size: int) -> ShardFile:
        """The shard with its footer fetched (one ranged GET, two if it is larger than the guess)
        and kept until `add`."""
        tail = self._fetch_footer(path, size)
        self._sizes[path], self._tails[path] = size, tail
        return ShardFile(self._fs, path, size, tail)

    def _fetch_footer(self, path: str, size: int) -> bytes:
        if not size:
            return b""
        tail: bytes = self._fs.cat_file(path, start=max(0, size - self.footer_guess.bytes), end=size)
        footer = footer_bytes(tail)
        if footer is None or footer > size:
            return tail  # not a Parquet file's end: pyarrow reads it itself and says what is wrong
        if footer > len(tail):
            tail = self._fs.cat_file(path, start=size - footer, end=size - len(tail)) + tail
        self.footer_guess.saw(footer)
        return tail

    def add(self, path: str, url: str) -> None:
        """A fragment for a shard whose `footer` was fetched; its rows' `filename` is `url`."""
        fragment = self._format.make_fragment(
            path, self._filesystem, pc.field(FILENAME_COLUMN) == url, file_size=self._sizes[path]
        )
        try:
            fragment.ensure_complete_metadata()  # parsed from the kept tail: nothing downloaded
        finally:
            self._tails.pop(path, None)
        self._fragments[path] = fragment

    def forget(self, path: str) -> None:
        self._tails.pop(path, None)
        self._sizes.pop(path, None)

    def dataset(self, paths: Iterable[str]) -> ds.Dataset:
        """The shards at `paths` (each `add`ed) as one dataset: the step schema plus `filename`."""
        return ds.FileSystemDataset(
            [self._fragments[p] for p in paths], SHARD_ROWS_SCHEMA, self._format, self._filesystem
        )
