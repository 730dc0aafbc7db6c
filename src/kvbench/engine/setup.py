"""Per-target connection setup: which codec, and what to send before the first request.

Redis connections authenticate (AUTH, or HELLO 3 with AUTH), then SELECT their database;
memcached connections need nothing; HTTP gateway codecs get the URL's path and Host.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvbench.config.model import TargetConfig
from kvbench.protocols.base import ClientCodec, CodecOptions
from kvbench.protocols.http1 import HttpMemcCodec, host_header, request_frame
from kvbench.protocols.registry import CODECS
from kvbench.protocols.resp import RespCodec

if TYPE_CHECKING:
    import ssl


def codec_factory_for(
    target: TargetConfig, options: CodecOptions | None = None
) -> Callable[[], ClientCodec]:
    """A zero-argument factory of fresh codecs for ``target``."""
    spec = CODECS[target.protocol]
    opts = options or CodecOptions()
    if target.family == "http":  # the gateway's location and Host come from the URL
        host = host_header(target.host, target.port)
        return lambda: HttpMemcCodec(opts, path=target.path, host=host)
    if target.cluster:  # MOVED and ASK told apart from error replies (engine/redirect.py)
        version = 3 if target.protocol == "resp3" else 2
        return lambda: RespCodec(opts, protocol=version, cluster=True)
    return lambda: spec.factory(opts)


def http_frame(target: TargetConfig) -> tuple[bytes, bytes]:
    """An HTTP gateway target's requests' start and end (``http1.request_frame``): its
    URL's path and Host, as its codecs write them."""
    return request_frame(target.path, host_header(target.host, target.port))


def setup_for(target: TargetConfig) -> Callable[[Any, bytearray], int] | None:
    """The setup writer for ``target``'s connections, or None when none is needed."""
    if target.family != "redis":
        return None
    if target.protocol != "resp3" and target.password is None and target.db == 0:
        return None

    def write_setup(codec: Any, out: bytearray) -> int:
        count = 0
        if target.protocol == "resp3":
            count += codec.encode_hello(out, target.username, target.password)
        elif target.password is not None:
            count += codec.encode_auth(out, target.password, target.username)
        if target.db:
            count += codec.encode_select(out, target.db)
        return int(count)

    return write_setup


def ssl_context_for(target: TargetConfig) -> ssl.SSLContext | None:
    """The TLS client context for a ``rediss://`` target, or None for plain TCP."""
    if not target.tls:
        return None
    import ssl  # only for TLS: the coordinator probing a plain target does without it

    context = ssl.create_default_context(cafile=target.tls_ca)
    if target.tls_insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if target.tls_cert and target.tls_key:
        context.load_cert_chain(target.tls_cert, target.tls_key)
    return context
