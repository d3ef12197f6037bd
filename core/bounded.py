"""A cache that keeps a fixed number of entries, the oldest dropped first: the one home of the
bounded memo that explainers, evaluators and the dashboard keep per configuration.

First in, first out (a hit does not refresh an entry): the entries are a few configurations
in use at once, and what matters is that memory stays bounded however many are asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """At most `size` entries by key; storing one more drops the oldest stored."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a bounded cache holds at least one entry")
        self.size = size
        self._entries: dict[K, V] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __getitem__(self, key: K) -> V:
        return self._entries[key]

    def get(self, key: K) -> V | None:
        return self._entries.get(key)

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self._entries and len(self._entries) >= self.size:
            del self._entries[next(iter(self._entries))]  # the oldest
        self._entries[key] = value

    def pop(self, key: K) -> V:
        return self._entries.pop(key)

    def clear(self) -> None:
        self._entries.clear()

    def get_or_compute(self, key: K, compute: Callable[[], V]) -> V:
        """The entry under `key`, computed and stored when there is none."""
        if key not in self._entries:
            self[key] = compute()
        return self._entries[key]
