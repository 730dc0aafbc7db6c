"""Which codec each connection gets: its ttl, the verifying wrapper under ``--verify``,
the read-modify-write wrapper when the ratio has ``rmw`` (engine/rmw.py).

Codecs take the expiry from ``CodecOptions`` (fixed for a connection's life), so a ttl
range (``--ttl 60-120``) is realised per connection: each draws its ttl uniformly from
the range (seeded by the run's seed and the worker), and every store it sends carries
that one ttl. With many connections the ttls cover the range; per request they do not.
The compiled driver does the same: each connection's pump is given its ttl
(engine/fastpath.py ``PumpFactory``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kvbench.config.model import TargetConfig, WorkloadConfig
from kvbench.engine.rmw import rmw_codecs
from kvbench.engine.setup import codec_factory_for
from kvbench.engine.verify import Verifier, verifying
from kvbench.protocols.base import ClientCodec, CodecOptions


def connection_ttls(config: WorkloadConfig, worker_index: int, count: int) -> list[int]:
    """The ttl (seconds) of each of a worker's ``count`` connections."""
    low = config.ttl_s
    high = config.ttl_max_s if config.ttl_max_s is not None else low
    if high == low:
        return [low] * count
    rng = np.random.default_rng([config.seed, worker_index, 3])
    return [int(t) for t in rng.integers(low, high + 1, count)]


def connection_codec_factories(
    target: TargetConfig,
    config: WorkloadConfig,
    ttls: Sequence[int],
    verifier: Verifier | None,
) -> list[Callable[[], ClientCodec]]:
    """One codec factory per connection, each sending its ttl from ``ttls``
    (``connection_ttls``): a reconnect builds a fresh codec from it."""
    factories: dict[int, Callable[[], ClientCodec]] = {}
    out = []
    for ttl in ttls:
        if ttl not in factories:
            options = CodecOptions(ttl_s=ttl, keep_payload=verifier is not None)
            factory = codec_factory_for(target, options)
            factories[ttl] = (
                verifying(factory, verifier, config.set_then_get)
                if verifier is not None
                else factory
            )
            if config.rmw:  # (config refuses --verify beside it)
                factories[ttl] = rmw_codecs(factories[ttl])
        out.append(factories[ttl])
    return out
