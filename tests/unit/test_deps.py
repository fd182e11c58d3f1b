"""Deps.replacing: one caller's ports swapped, the rest shared with the process's Deps."""

from __future__ import annotations

import pytest

from shared.contract.config import Settings
from shared.contract.deps import Deps, Lazy


def test_replacing_swaps_one_port_and_shares_the_rest_built_once():
    built = []

    def blobs():
        built.append("blobs")
        return object()

    base = Deps(Settings(), blobs=Lazy(blobs), fetcher="the guarded fetcher", clock="clock")
    loopback = base.replacing(fetcher="the loopback fetcher")
    assert loopback.fetcher == "the loopback fetcher"
    assert base.fetcher == "the guarded fetcher"  # the process's Deps is unchanged
    assert loopback.blobs is base.blobs and built == ["blobs"]  # whichever asks first builds it, once
    assert loopback.clock == "clock" and loopback.settings is base.settings
    with pytest.raises(RuntimeError, match="no 'index'"):
        loopback.index  # noqa: B018 - what the base does not provide, the copy does not either
    with pytest.raises(TypeError, match="unknown dependencies"):
        base.replacing(fetchr="typo")
