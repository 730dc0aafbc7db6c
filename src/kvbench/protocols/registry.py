"""The codec registry: CLI/URL protocol name -> CodecSpec."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvbench.protocols.base import ClientCodec, CodecOptions, Op
from kvbench.protocols.commands import RequestTemplate, Word, resp_template, text_template
from kvbench.protocols.http1 import HttpMemcCodec
from kvbench.protocols.memcache_binary import MemcacheBinaryCodec
from kvbench.protocols.memcache_meta import MemcacheMetaCodec
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.resp import RespCodec


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """A registry entry: how to build a codec and what it can do.

    Attributes:
        name: the registry key (``memcache-text``, ``resp2`` ...).
        factory: builds one codec for one connection.
        ordered_replies: replies come back in request order (all codecs here: the binary and
            meta codecs match opaques and still yield replies in request order).
        ops: the ops this codec can encode.
        default_port: the server's usual port.
        command_template: compiles a command's words (``protocols.commands``) into the
            template of its ``Op.COMMAND`` requests; None when the protocol sends no
            arbitrary commands.
    """

    name: str
    factory: Callable[[CodecOptions], ClientCodec]
    ordered_replies: bool
    ops: frozenset[Op]
    default_port: int
    command_template: Callable[[Sequence[Word]], RequestTemplate] | None = None


_MEMCACHE_OPS = frozenset(Op) - {Op.COMMAND}
_TEXT_OPS = frozenset(Op) - {Op.NOOP}
_RESP_OPS = frozenset(Op) - {Op.CAS, Op.GETS, Op.PREPEND}
_HTTP_MEMC_OPS = frozenset(
    {
        Op.GET,
        Op.SET,
        Op.ADD,
        Op.REPLACE,
        Op.APPEND,
        Op.PREPEND,
        Op.DELETE,
        Op.INCR,
        Op.DECR,
        Op.STATS,
    }
)

CODECS: dict[str, CodecSpec] = {
    "memcache-text": CodecSpec(
        "memcache-text", MemcacheTextCodec, True, _TEXT_OPS, 11211, text_template
    ),
    "memcache-binary": CodecSpec(
        "memcache-binary", MemcacheBinaryCodec, True, _MEMCACHE_OPS, 11211
    ),
    "memcache-meta": CodecSpec("memcache-meta", MemcacheMetaCodec, True, _MEMCACHE_OPS, 11211),
    "resp2": CodecSpec(
        "resp2",
        lambda options: RespCodec(options, protocol=2),
        True,
        _RESP_OPS,
        6379,
        resp_template,
    ),
    "resp3": CodecSpec(
        "resp3",
        lambda options: RespCodec(options, protocol=3),
        True,
        _RESP_OPS,
        6379,
        resp_template,
    ),
    # The factory's codecs speak to location /memc of localhost; engine.setup gives each
    # target's codec its own path and Host.
    "http-memc": CodecSpec("http-memc", HttpMemcCodec, True, _HTTP_MEMC_OPS, 80),
}
