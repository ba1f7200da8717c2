"""One map over the shards of a coordinator topic: a coordinator's view of everything it
serves (its groups, its transactional ids), each entry kept by the shard of its partition.

Reading an entry of a partition not loaded here finds nothing; writing one there is refused
(KeyError): the coordinator validated the request against the runtime first.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from .runtime import CoordinatorRuntime


class ShardStateView(MutableMapping[str, Any]):
    """The `attr` dict of every `topic` shard loaded in `runtime`, by key; a key lives in the
    shard of partition `partition_for(key)`."""

    def __init__(self, runtime: CoordinatorRuntime, topic: str,
                 partition_for: Callable[[str], int], attr: str) -> None:
        self._runtime, self._topic, self._attr = runtime, topic, attr
        self._partition_for = partition_for

    def _map(self, key: str) -> dict[str, Any] | None:
        shard = self._runtime.shard(self._topic, self._partition_for(key))
        return None if shard is None else getattr(shard, self._attr)

    def _maps(self) -> list[dict[str, Any]]:
        return [getattr(shard, self._attr) for _, shard in self._runtime.shards(self._topic)]

    def __getitem__(self, key: str) -> Any:
        found = self._map(key)
        if found is None:
            raise KeyError(key)
        return found[key]

    def __setitem__(self, key: str, value: Any) -> None:
        found = self._map(key)
        if found is None:
            raise KeyError(f"{key}: its partition of {self._topic} is not coordinated here")
        found[key] = value

    def __delitem__(self, key: str) -> None:
        found = self._map(key)
        if found is None:
            raise KeyError(key)
        del found[key]

    def __iter__(self) -> Iterator[str]:
        return iter([key for found in self._maps() for key in found])

    def __len__(self) -> int:
        return sum(len(found) for found in self._maps())
