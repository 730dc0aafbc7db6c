"""The probe reads the server's settings: memcached ``stats settings``, Redis CONFIG/INFO."""

from __future__ import annotations

import pytest

from kvbench.config.targets import parse_target
from kvbench.errors import TargetUnreachable
from kvbench.runner.probe import fetch_settings
from tests.support import servers
from tests.support.servers import Server

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("scheme", ["memcached", "memcached+binary", "memcached+meta"])
def test_memcached_settings_in_every_protocol(memcached_server: Server, scheme: str) -> None:
    settings = fetch_settings(parse_target(f"{scheme}://{memcached_server.address}"))
    # the fixture starts memcached with -m 64 -t 2
    assert settings["maxbytes"] == str(64 * 1024 * 1024)
    assert settings["num_threads"] == "2"
    assert settings["tcpport"] == str(memcached_server.port)


def test_redis_settings_with_a_password() -> None:
    with servers.redis("--requirepass", "s3cret", "--maxmemory", "10mb") as server:
        settings = fetch_settings(parse_target(f"redis://:s3cret@{server.address}"))
        assert settings["maxmemory"] == str(10 * 1024 * 1024)
        assert settings["maxmemory-policy"] == "noeviction"
        assert settings["appendonly"] == "no"
        assert settings["redis_version"].count(".") == 2
        assert settings["multiplexing_api"]
        assert "uptime_in_seconds" not in settings  # changes while it runs: not a setting
        with pytest.raises(TargetUnreachable, match="refused"):
            fetch_settings(parse_target(f"redis://:wrong@{server.address}"))


def test_redis_with_config_disabled_still_gives_info_server() -> None:
    with servers.redis("--rename-command", "CONFIG", '""') as server:
        settings = fetch_settings(parse_target(f"redis://{server.address}"))
        assert "config_error" in settings
        assert "maxmemory" not in settings
        assert settings["redis_mode"] == "standalone"
