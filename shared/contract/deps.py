"""The dependencies a handler may ask for, built lazily on first use.

One ``Deps`` is built per process by :mod:`shared.runtime.bootstrap`; heavy
clients (embedder, index, model) are constructed the first time a handler
needs them and then reused, as Cloud Functions samples do with module-scope
clients.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from shared.contract.config import Settings
from shared.contract.ports import (
    BlobStore,
    Clock,
    Embedder,
    Fetcher,
    Index,
    LanguageModel,
    Publisher,
    StateStore,
)


class Deps:
    """Lazily built ports. Pass factories (or ready objects) by name."""

    _NAMES = ("publisher", "state", "blobs", "clock", "fetcher", "embedder", "index", "llm")

    def __init__(self, settings: Settings, **providers: Any) -> None:
        unknown = set(providers) - set(self._NAMES)
        if unknown:
            raise TypeError(f"unknown dependencies: {sorted(unknown)}")
        self.settings = settings
        self._providers = providers
        self._built: dict[str, Any] = {}
        self._lock = threading.RLock()

    def _get(self, name: str) -> Any:
        if name in self._built:
            return self._built[name]
        with self._lock:
            if name not in self._built:
                provider = self._providers.get(name)
                if provider is None:
                    raise RuntimeError(f"this runtime provides no {name!r}")
                self._built[name] = provider() if callable(provider) and _is_factory(provider) else provider
            return self._built[name]

    def override(self, name: str, provider: Any) -> None:
        """Replace the port ``name`` (before or after it was first built)."""
        if name not in self._NAMES:
            raise TypeError(f"unknown dependency {name!r}")
        with self._lock:
            self._providers[name] = provider
            self._built.pop(name, None)

    def provided(self, name: str) -> bool:
        return name in self._providers

    def built(self, name: str) -> Any | None:
        """The port ``name`` when it was built already, else None (never builds it): what a probe
        reads of a port without paying for one this process did not need."""
        return self._built.get(name)

    def replacing(self, **providers: Any) -> Deps:
        """These ports replaced for one caller (a poll's loopback fetcher); the rest are this
        ``Deps``'s own, built once whichever of the two asks first. This ``Deps`` is unchanged."""
        unknown = set(providers) - set(self._NAMES)
        if unknown:
            raise TypeError(f"unknown dependencies: {sorted(unknown)}")
        shared = {name: Lazy(functools.partial(self._get, name)) for name in self._providers if name not in providers}
        return Deps(self.settings, **shared, **providers)

    @property
    def publisher(self) -> Publisher:
        return self._get("publisher")

    @property
    def state(self) -> StateStore:
        return self._get("state")

    @property
    def blobs(self) -> BlobStore:
        return self._get("blobs")

    @property
    def clock(self) -> Clock:
        return self._get("clock")

    @property
    def fetcher(self) -> Fetcher:
        return self._get("fetcher")

    @property
    def embedder(self) -> Embedder:
        return self._get("embedder")

    @property
    def index(self) -> Index:
        return self._get("index")

    @property
    def llm(self) -> LanguageModel:
        return self._get("llm")


class Lazy:
    """Marks a zero-argument factory: ``Deps(settings, index=Lazy(build_index))``."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory

    def __call__(self) -> Any:
        return self.factory()


def _is_factory(provider: Any) -> bool:
    return isinstance(provider, Lazy)
