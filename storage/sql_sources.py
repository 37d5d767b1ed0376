"""Where `distrl sql` reads S3 shards from: a pyarrow dataset over byte ranges, so that a query
downloads the columns it names and not the screenshots beside them.

DuckDB reading S3 shards itself, through the registered s3fs filesystem, downloaded the shards
whole one to four times over for a `count(*)` (s3fs reads ahead up to 50 MB on a file's first
read, and DuckDB's external file cache keeps what it likes); with byte ranges instead, its many
small GETs per query made queries 10x slower. Registering a pyarrow dataset as the views' source
hands DuckDB's projection (and filters) to pyarrow, whose Parquet reader fetches only the named
column chunks, coalesced (`pre_buffer`), one ranged GET each; what a session downloaded is kept
(`RangeCache`, bounded) for its later queries.

Each shard's footer is fetched once, when the session checks it (the last 64 KiB, what pyarrow
reads to find a footer), parsed into its fragment, and dropped. The file each row came from is the
`filename` column, a partition value of its fragment (nothing is read for it), as DuckDB's
`filename=true` gives it.
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

# pyarrow reads this much of a file's end to find its footer (parquet's default footer read size):
# fetching as much once, when the footer is checked, lets every later footer read hit memory.
FOOTER_READ_BYTES = 64 * 1024
FILENAME_COLUMN = "filename"
SHARD_ROWS_SCHEMA = STEP_SCHEMA.append(pa.field(FILENAME_COLUMN, pa.string()))


class RangeCache:
    """Byte ranges this session downloaded, kept up to `limit` bytes (then no more are kept): a
    query repeated, or one naming the same columns, reads them from memory."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0
        self._ranges: dict[str, list[tuple[int, bytes]]] = {}
        self._lock = threading.Lock()

    def get(self, path: str, start: int, end: int) -> bytes | None:
        with self._lock:
            for first, data in self._ranges.get(path, ()):
                if first <= start and end <= first + len(data):
                    return data[start - first : end - first]
        return None

    def put(self, path: str, start: int, data: bytes) -> None:
        with self._lock:
            if self.size + len(data) <= self.limit:
                self._ranges.setdefault(path, []).append((start, data))
                self.size += len(data)


class ShardFile(io.RawIOBase):
    """A read-only shard on a ranged filesystem whose last bytes (`tail`) are already in memory:
    reads inside the tail cost nothing, others come from `cache` or are one ranged GET each."""

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
        kept = self._cache.get(self._path, start, end) if self._cache is not None else None
        if kept is not None:
            return kept
        data: bytes = self._fs.cat_file(self._path, start=start, end=end)
        if self._cache is not None:
            self._cache.put(self._path, start, data)
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
        self._format = ds.ParquetFileFormat(  # a column chunk's pages in one GET
            default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True)
        )
        self._fs = fs
        self._fragments: dict[str, ds.Fragment] = {}

    def footer(self, path: str, size: int) -> ShardFile:
        """The shard, its last `FOOTER_READ_BYTES` fetched (one ranged GET) and kept until `add`."""
        tail = self._fs.cat_file(path, start=max(0, size - FOOTER_READ_BYTES), end=size) if size else b""
        self._sizes[path], self._tails[path] = size, tail
        return ShardFile(self._fs, path, size, tail)

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
