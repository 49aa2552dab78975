"""A protobuf-style enum (``Name``/``Value``/``keys``...) that needs no protobuf: the
module constants of OneFlow's ``*_pb2`` modules are plain ints, as protobuf makes them."""
from __future__ import annotations


class Enum:
    """``DataType.Value("kFloat") == 2``, ``DataType.Name(2) == "kFloat"``."""

    def __init__(self, name: str, values: dict[str, int]):
        self.name = name
        self._values = dict(values)
        self._names = {v: k for k, v in values.items()}

    def Name(self, number: int) -> str:  # noqa: N802 - protobuf's name
        if number not in self._names:
            raise ValueError(f"enum {self.name} has no value {number!r}")
        return self._names[number]

    def Value(self, name: str) -> int:  # noqa: N802 - protobuf's name
        if name not in self._values:
            raise ValueError(f"enum {self.name} has no name {name!r}")
        return self._values[name]

    def keys(self) -> list[str]:
        return list(self._values)

    def values(self) -> list[int]:
        return list(self._values.values())

    def items(self) -> list[tuple[str, int]]:
        return list(self._values.items())

    def __repr__(self) -> str:
        return f"<enum {self.name}>"
