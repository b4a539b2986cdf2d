"""`envs.serving.memory`: the env server's glibc calls that keep its resident memory flat."""

from __future__ import annotations

import platform

import pytest

from envs.serving import memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt and malloc_trim")
def test_on_glibc_the_arenas_are_capped_and_free_pages_handed_back():
    assert memory.limit_arenas() is True
    assert memory.trim() is True


def test_without_glibc_both_are_no_ops(monkeypatch):
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert memory.limit_arenas() is False
    assert memory.trim() is False


def test_the_reaper_trims_now_and_then(monkeypatch):
    """The session store's reaper calls `trim` once `TRIM_EVERY_S` has passed."""
    import asyncio

    from envs.serving.limits import EnvServerConfig
    from envs.serving.sessions import SessionStore

    calls = []
    monkeypatch.setattr(memory, "TRIM_EVERY_S", 0.0)
    monkeypatch.setattr(memory, "trim", lambda: calls.append(1) or True)
    store = SessionStore(EnvServerConfig(idle_timeout_s=0.04))

    async def run() -> None:
        task = asyncio.create_task(store.reap_forever())
        while len(calls) < 2:  # no deadline needed: each reaper pass trims once
            await asyncio.sleep(0.01)
        task.cancel()
        await store.shutdown()

    asyncio.run(asyncio.wait_for(run(), timeout=60))
    assert len(calls) >= 2
