"""The side connection before a run: servers that give no stats, or no reply at all."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kvbench.config.targets import parse_target
from kvbench.errors import TargetUnreachable
from kvbench.runner.probe import Unanswered, fetch_stats, preflight
from tests.support import fake_servers


def test_a_server_answering_error_to_stats_is_accepted_with_a_note() -> None:
    with fake_servers.stats_error(backend_port=1) as port:
        version, note = preflight(parse_target(f"memcached://127.0.0.1:{port}"), 0.3)
    assert version == "unknown"
    assert note == (
        f"memcached://127.0.0.1:{port} answered 'stats' with ERROR (a proxy?): "
        "no server-side stats for this run"
    )


def test_a_server_closing_on_stats_is_accepted_with_a_note() -> None:
    with fake_servers.closing() as port:
        version, note = preflight(parse_target(f"memcached://127.0.0.1:{port}"), 0.3)
    assert version == "unknown"
    assert note is not None and "closed the connection on 'stats'" in note


@pytest.mark.parametrize(("timeout_s", "text"), [(0.3, "300ms"), (0.5, "500ms")])
def test_a_server_that_never_answers_is_no_reply_within_the_timeout(
    timeout_s: float, text: str
) -> None:
    with fake_servers.silent() as port:
        url = f"memcached://127.0.0.1:{port}"
        started = time.monotonic()
        with pytest.raises(TargetUnreachable) as caught:
            preflight(parse_target(url), timeout_s)
        waited = time.monotonic() - started
    assert str(caught.value) == (
        f"{url} accepted the connection but gave no reply to 'stats' within {text}"
    )
    assert timeout_s <= waited < timeout_s + 1.0  # the timeout given, not a fixed 3 s


def test_redis_that_never_answers_names_its_request() -> None:
    with (
        fake_servers.silent() as port,
        pytest.raises(TargetUnreachable, match="no reply to 'INFO all' within 200ms"),
    ):
        fetch_stats(parse_target(f"redis://127.0.0.1:{port}"), 0.2)


def test_nothing_listening_is_still_cannot_connect() -> None:
    with fake_servers.silent() as port:
        pass  # the port is free again
    with pytest.raises(TargetUnreachable, match=r"^cannot connect to .*: connection refused$"):
        preflight(parse_target(f"memcached://127.0.0.1:{port}"), 0.3)


def test_redis_refusing_info_is_still_refused() -> None:
    """Only memcached proxies go without stats: Redis sends AUTH with INFO, and a close
    may be the AUTH's answer."""
    with fake_servers.closing() as port, pytest.raises(TargetUnreachable, match="closed"):
        preflight(parse_target(f"redis://127.0.0.1:{port}"), 0.3)


def test_an_ask_cut_short_by_ctrl_c_is_not_asked_again_at_once() -> None:
    """A Ctrl-C while a stalled server's interval sample waited: the sample that follows
    the interrupt is not asked (it was, and the run's end waited --timeout for it)."""
    asks = Unanswered(60_000_000_000)
    asked: list[int] = []

    def interrupted() -> dict[str, str] | None:
        asked.append(1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asks.ask(interrupted)
    assert asks.ask(lambda: asked.append(2) or {"ok": "1"}) is None
    assert asked == [1]


def test_after_an_interrupt_a_server_sample_waits_a_second_at_most() -> None:
    """The coordinator's samples wait --timeout (60 s here) during a run, and at most
    ``STOP_SAMPLE_S`` once it is interrupted: a stalled server does not hold its end."""
    from kvbench.config.load import load_config
    from kvbench.runner.coordinator import STOP_SAMPLE_S, Coordinator

    with fake_servers.silent() as port:
        config = load_config(
            None,
            {
                "target.urls": ([f"memcached://127.0.0.1:{port}"], "TARGET"),
                "load.timeout": ("60s", "--timeout"),
            },
            2,
        )
        launcher: Any = object()  # never asked: no round is run
        coordinator = Coordinator(config, launcher=launcher)
        assert coordinator._probe_timeout_s == 60
        coordinator._interrupted(KeyboardInterrupt())
        assert coordinator._probe_timeout_s == STOP_SAMPLE_S == 1
        assert coordinator._interval_sample() is None  # unanswered: no figures
    # (what the ask was given, in its own words: not a wall-clock bound a busy machine
    # may stretch)
    assert coordinator._sample_errors == [
        f"memcached://127.0.0.1:{port} accepted the connection but gave no reply to 'stats'"
        " within 1s"
    ]
