"""The policy versions that the collectors of one process act with: each built once, copied per collector.

Every collector used to build its own copy of each published version from the files
(`load_policy`: tokenizer, model, base hash check, weights), one thread at a time behind the
loader's lock. With 64 collectors in a worker process that is 64 serialised builds per published
version, paid again at every publish: `bench.scaling` found collectors spending half of their
wall-clock inside `load_policy` at 4 per process. Now the first collector to ask builds the version
and keeps it untouched as a template; each collector gets a deep copy (about 7x cheaper than a
build on the tiny policy), so collectors still own their policy, its sampling generator and its
train/eval state, and a copy acts exactly as a fresh build would.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from pathlib import Path

from distrl_core.policy import Policy, load_policy

KEEP_VERSIONS = 2  # the newest and the one collectors are still switching away from


class PolicyTemplates:
    """Built versions by (directory, manifest digest), newest last; thread-safe."""

    def __init__(self, keep: int = KEEP_VERSIONS) -> None:
        self.keep = keep
        self.builds = 0  # versions built from files (the rest were copies)
        self._lock = threading.Lock()
        self._templates: OrderedDict[tuple[str, str | None], Policy] = OrderedDict()
        self._building: dict[tuple[str, str | None], threading.Lock] = {}

    def copy_of(self, directory: Path, digest: str | None = None) -> Policy:
        """A collector's own copy of the version in `directory`; `digest` (its manifest's sha256)
        tells apart two contents of one directory (a damaged cached copy that was fetched again)."""
        key = (str(Path(directory).resolve()), digest)
        with self._lock:
            template = self._templates.get(key)
            building = self._building.setdefault(key, threading.Lock())
        if template is None:
            with building:  # one thread builds; the others of this version wait for it
                with self._lock:
                    template = self._templates.get(key)
                if template is None:
                    template = load_policy(directory).eval()
                    with self._lock:
                        self.builds += 1
                        self._templates[key] = template
                        while len(self._templates) > self.keep:
                            old, _ = self._templates.popitem(last=False)
                            self._building.pop(old, None)
        with self._lock:
            if key in self._templates:  # not evicted meanwhile by two newer versions
                self._templates.move_to_end(key)
        return copy.deepcopy(template)

    def clear(self) -> None:
        with self._lock:
            self._templates.clear()
            self._building.clear()


templates = PolicyTemplates()
