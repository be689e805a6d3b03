"""ZooKeeper's JVM maps a class-data-sharing archive written by the first clean stop
(``devtools.zookeeper_server.class_data_archive``): restarts take half the time, which
the chaos campaign's hundreds of ZooKeeper restarts need."""

from __future__ import annotations

from pathlib import Path

import pytest

from gregor_broker.devtools.zookeeper_server import ZooKeeperServer


def _cmdline(server: ZooKeeperServer) -> str:
    assert server.process is not None
    return Path(f"/proc/{server.process.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_the_first_clean_stop_writes_the_archive_later_starts_map_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    server = ZooKeeperServer(tmp_path / "zookeeper")
    server.start()
    try:
        assert server.writes_class_data_archive
        assert "-XX:ArchiveClassesAtExit=" in _cmdline(server)
        server.kill()  # a kill -9 writes nothing
        assert not list((tmp_path / "cache" / "gregor").glob("*.jsa*"))
        server.start()
        server.stop()
        archives = list((tmp_path / "cache" / "gregor").glob("*"))
        assert [path.suffix for path in archives] == [".jsa"], archives
        server.start()
        assert not server.writes_class_data_archive
        assert f"-XX:SharedArchiveFile={archives[0]}" in _cmdline(server)
        assert server.is_serving()
    finally:
        server.stop()
