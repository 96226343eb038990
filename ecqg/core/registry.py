"""Named classes, imported on first use: what the retriever and the question-generator registries share.

Why: a new retriever or generator is one module with one ``@register`` class and one line naming its module; a
params file names it, and nothing is imported until it is built. A ``Registry`` maps names to classes (``kind``)
and knows which module defines each built-in one.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping


class Registry:
    """``kind -> class``; ``builtin`` maps each built-in kind to the module that registers it."""

    def __init__(self, what: str, builtin: Mapping[str, str]):
        self.what, self.builtin, self.classes = what, dict(builtin), {}

    def register(self, cls: type) -> type:
        """Class decorator: make ``cls`` findable by its ``kind``."""
        if not getattr(cls, "kind", None):
            raise ValueError(f"{cls.__name__}: a {self.what} needs a class attribute kind")
        self.classes[cls.kind] = cls
        return cls

    def get(self, kind: str) -> type:
        """The class of ``kind``, importing its module first if it is a built-in one not loaded yet."""
        if kind not in self.classes and kind in self.builtin:
            importlib.import_module(self.builtin[kind])
        if kind not in self.classes:
            raise ValueError(f"unknown {self.what} {kind!r}; known: {sorted(set(self.classes) | set(self.builtin))}")
        return self.classes[kind]

    def every(self) -> list[type]:
        """Every registered class, the built-in ones imported."""
        for module in dict.fromkeys(self.builtin.values()):
            importlib.import_module(module)
        return list(self.classes.values())

    def claimants(self, claims) -> list[type]:
        """Every registered class for which ``claims(cls)`` holds, checked never to be more than one: two classes
        claiming one model or checkpoint would make the choice depend on import order."""
        found = [cls for cls in self.every() if claims(cls)]
        if len(found) > 1:
            raise ValueError(f"more than one {self.what} claims it: {[c.kind for c in found]}")
        return found

    def __getitem__(self, kind: str) -> type:
        return self.classes[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self.classes)
