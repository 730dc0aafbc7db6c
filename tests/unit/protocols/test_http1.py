"""HttpMemcCodec: byte-exact requests, every reply kind, framing, incrementality, failures."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from kvbench.config.targets import HTTP_KEY_SAFE
from kvbench.errors import ProtocolError, ReplyTooLarge
from kvbench.protocols.base import NEED_DATA, ClientCodec, CodecOptions, Op, Reply, ReplyKind
from kvbench.protocols.http1 import (
    KEY_SAFE,
    MAX_HEAD_BYTES,
    UNRESERVED,
    VALUE_TABLE,
    HttpMemcCodec,
    check_key,
    host_header,
    url_safe_value,
)
from tests.support.codec_checks import drain, feed_bytewise, feed_whole

K = ReplyKind
TAIL = b" HTTP/1.1\r\nHost: gw:8080\r\n\r\n"


def response(
    status: int = 200,
    reason: str = "OK",
    body: bytes = b"",
    *,
    headers: Sequence[str] = (),
    chunks: Sequence[bytes] | None = None,
    version: str = "1.1",
    connection: str | None = "keep-alive",
) -> bytes:
    """A response the way nginx writes one (Server, Date, Content-Type, framing, Connection)."""
    lines = [
        f"HTTP/{version} {status} {reason}",
        "Server: nginx/1.22.1",
        "Date: Sun, 29 Nov 2026 21:19:56 GMT",
        "Content-Type: text/plain",
    ]
    if chunks is not None:
        lines.append("Transfer-Encoding: chunked")
        body = b"".join(b"%x\r\n%b\r\n" % (len(c), c) for c in chunks if c) + b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
    if connection is not None:
        lines.append(f"Connection: {connection}")
    lines += headers
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


NOT_FOUND_PAGE = (
    b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
    b"<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
MISS = response(404, "Not Found", NOT_FOUND_PAGE)
BAD_GATEWAY = response(502, "Bad Gateway", b"<html>502</html>")


def codec(**options: object) -> HttpMemcCodec:
    return HttpMemcCodec(CodecOptions(**options), path="/memc", host="gw:8080")  # type: ignore[arg-type]


def feed_with_trailing(c: HttpMemcCodec, data: bytes) -> list[Reply]:
    # The start of the next response (to a further request) must not disturb this one.
    c.encode(Op.GET, b"next", None, bytearray())
    replies = feed_whole(c, data + b"HTTP/1.1 200 OK\r\nContent-Le")
    assert c.pending() == 1
    return replies


FEEDERS = [feed_whole, feed_bytewise, feed_with_trailing]
Feeder = Callable[[HttpMemcCodec, bytes], list[Reply]]


def request(
    op: Op, key: object = b"k", value: object = None, arg: int = 0, **opts: object
) -> bytes:
    c = codec(**opts)
    out = bytearray()
    assert c.encode(op, key, value, out, arg) == 1  # type: ignore[arg-type]
    assert c.pending() == 1
    return bytes(out)


def test_http_memc_codec_is_a_client_codec() -> None:
    c: ClientCodec = codec()  # mypy checks the Protocol, batch methods included
    assert c.pending() == 0


# -- encoding ---------------------------------------------------------------------------------


def test_get_delete_incr_decr_requests() -> None:
    assert request(Op.GET, b"kvbench:12") == b"GET /memc?cmd=get&key=kvbench:12" + TAIL
    assert request(Op.DELETE, b"k") == b"GET /memc?cmd=delete&key=k" + TAIL
    assert request(Op.INCR, b"c", arg=1) == b"GET /memc?cmd=incr&key=c&val=1" + TAIL
    assert request(Op.DECR, b"c", arg=25) == b"GET /memc?cmd=decr&key=c&val=25" + TAIL


@pytest.mark.parametrize(
    "op, cmd",
    [(Op.SET, b"set"), (Op.ADD, b"add"), (Op.REPLACE, b"replace"), (Op.APPEND, b"append"),
     (Op.PREPEND, b"prepend")],
)  # fmt: skip
def test_store_requests_carry_the_value_in_the_query(op: Op, cmd: bytes) -> None:
    expected = b"GET /memc?cmd=%b&key=k&val=v-1_x~" % cmd + TAIL
    assert request(op, b"k", b"v-1_x~") == expected
    assert request(op, b"k", memoryview(b"v-1_x~")) == expected


def test_store_with_ttl_and_flags() -> None:
    assert request(Op.SET, b"k", b"v", ttl_s=300, flags=7) == (
        b"GET /memc?cmd=set&key=k&val=v&exptime=300&flags=7" + TAIL
    )


def test_stats_and_version_requests() -> None:
    assert request(Op.STATS, b"") == b"GET /memc?cmd=stats" + TAIL
    c = codec()
    out = bytearray()
    assert c.encode_version(out) == 1
    assert bytes(out) == b"GET /memc?cmd=version" + TAIL


def test_path_and_host_forms() -> None:
    out = bytearray()
    HttpMemcCodec(path="", host="h").encode(Op.GET, b"k", None, out)
    assert bytes(out) == b"GET /?cmd=get&key=k HTTP/1.1\r\nHost: h\r\n\r\n"
    assert host_header("127.0.0.1", 80) == "127.0.0.1"
    assert host_header("127.0.0.1", 8080) == "127.0.0.1:8080"
    assert host_header("::1", 8080) == "[::1]:8080"
    with pytest.raises(ValueError, match="not URL-safe"):
        HttpMemcCodec(path="a b")


def test_values_become_url_safe_bytes_of_the_same_size() -> None:
    value = bytes(range(256)) * 2
    sent = url_safe_value(value)
    assert len(sent) == len(value)
    assert set(sent) <= set(UNRESERVED)
    assert url_safe_value(UNRESERVED) == UNRESERVED  # URL-safe values go as they are
    assert len(VALUE_TABLE) == 256
    out = request(Op.SET, b"k", value)
    assert out == b"GET /memc?cmd=set&key=k&val=" + sent + TAIL


@pytest.mark.parametrize(
    "key", [b"", b"a b", b"a&b", b"a=b", b"a%20", b"a+b", b"a#b", b"a?b", b"\xff"]
)
def test_keys_that_are_not_url_safe_are_refused(key: bytes) -> None:
    c = codec()
    out = bytearray()
    with pytest.raises(ValueError, match="memc gateway"):
        c.encode(Op.GET, key, None, out)
    with pytest.raises(ValueError):
        c.encode_many([int(Op.GET)], [key], [None], 0, 1, out)
    assert out == b"" and c.pending() == 0


def test_config_key_rule_is_the_codec_key_rule() -> None:
    assert set(KEY_SAFE.decode()) == HTTP_KEY_SAFE
    assert check_key(bytearray(b"kvbench:1")) == b"kvbench:1"


@pytest.mark.parametrize("op", [Op.MGET, Op.GETS, Op.CAS, Op.TOUCH, Op.NOOP, Op.COMMAND])
def test_ops_without_a_memc_form_raise_value_error(op: Op) -> None:
    c = codec()
    with pytest.raises(ValueError, match="no"):
        c.encode(op, b"k", b"v", bytearray())
    assert c.pending() == 0


def test_bad_store_and_counter_arguments() -> None:
    with pytest.raises(ValueError, match="needs a value"):
        codec().encode(Op.SET, b"k", None, bytearray())
    with pytest.raises(ValueError, match=">= 0"):
        codec().encode(Op.INCR, b"k", None, bytearray(), -1)


# -- reply kinds ------------------------------------------------------------------------------

CASES = [
    (Op.GET, response(200, body=b"hello"), K.HIT, b"hello"),
    (Op.GET, response(200, body=b""), K.HIT, b""),
    (Op.GET, MISS, K.MISS, None),
    (Op.SET, response(201, "Created", b"STORED\r\n"), K.STORED, None),
    (Op.SET, response(200, body=b"STORED\r\n"), K.STORED, None),
    (Op.ADD, response(200, body=b"NOT_STORED\r\n"), K.NOT_STORED, None),
    (Op.REPLACE, response(404, "Not Found", NOT_FOUND_PAGE), K.NOT_FOUND, None),
    (Op.DELETE, response(200, body=b"DELETED\r\n"), K.DELETED, None),
    (Op.DELETE, MISS, K.NOT_FOUND, None),
    (Op.INCR, response(201, "Created", b"6\r\n"), K.VALUE, b"6"),
    (Op.DECR, response(200, body=b"4\r\n"), K.VALUE, b"4"),
    (Op.INCR, MISS, K.NOT_FOUND, None),
]


@pytest.mark.parametrize("feeder", FEEDERS)
@pytest.mark.parametrize("op, data, kind, payload", CASES)
def test_every_reply_kind(
    feeder: Feeder, op: Op, data: bytes, kind: ReplyKind, payload: bytes | None
) -> None:
    c = codec(keep_payload=True)
    c.encode(op, b"k", b"v", bytearray(), 1)
    [reply] = feeder(c, data)
    assert reply.kind == kind
    assert reply.nbytes == len(data)
    assert reply.payload == payload
    assert reply.keys == (1 if kind == K.HIT else 0)
    assert c.pending() == (1 if feeder is feed_with_trailing else 0)


def test_bodies_are_not_kept_unless_asked() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.encode(Op.INCR, b"k", None, bytearray(), 1)
    hit, value = feed_whole(c, response(200, body=b"xyz") + response(201, "Created", b"6\r\n"))
    assert (hit.kind, hit.payload, hit.keys) == (K.HIT, None, 1)
    assert (value.kind, value.payload) == (K.VALUE, None)


@pytest.mark.parametrize("feeder", FEEDERS)
@pytest.mark.parametrize(
    "status, reason",
    [(502, "Bad Gateway"), (504, "Gateway Time-out"), (500, "Internal Server Error"),
     (400, "Bad Request"), (403, "Forbidden"), (414, "Request-URI Too Large"),
     (301, "Moved Permanently")],
)  # fmt: skip
def test_error_statuses_are_error_replies_with_the_status_line(
    feeder: Feeder, status: int, reason: str
) -> None:
    c = codec()
    c.encode(Op.SET, b"k", b"v", bytearray())
    data = response(status, reason, b"<html>oops</html>")
    [reply] = feeder(c, data)
    assert reply.kind == K.ERROR_REPLY
    assert reply.payload == f"HTTP/1.1 {status} {reason}".encode()
    assert reply.nbytes == len(data)


def test_a_404_is_an_error_where_no_miss_is_expected() -> None:
    c = codec()
    c.encode(Op.STATS, b"", None, bytearray())
    [reply] = feed_whole(c, MISS)
    assert reply.kind == K.ERROR_REPLY


def test_unexpected_success_status_is_an_error_reply() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    [reply] = feed_whole(c, response(204, "No Content", connection=None))
    assert reply.kind == K.ERROR_REPLY and reply.payload == b"HTTP/1.1 204 No Content"


def test_version_reply_records_the_server_field() -> None:
    c = codec()
    c.encode_version(bytearray())
    [reply] = feed_whole(c, response(200, body=b"VERSION 1.6.18\r\n"))
    assert (reply.kind, reply.payload) == (K.VALUE, b"VERSION 1.6.18\r\n")
    assert c.server_software == "nginx/1.22.1"


def test_stats_reply_payload_is_name_value_lines() -> None:
    c = codec()
    c.encode(Op.STATS, b"", None, bytearray())
    body = b"STAT pid 1\r\nSTAT cmd_get 42\r\nEND\r\n"
    [reply] = feed_whole(c, response(200, body=body))
    assert reply.payload == b"pid 1\r\ncmd_get 42\r\n"


def test_replies_come_in_request_order() -> None:
    c = codec()
    out = bytearray()
    for op in (Op.SET, Op.GET, Op.GET, Op.DELETE):
        c.encode(op, b"k", b"v", out)
    data = response(201, "Created", b"STORED\r\n") + response(200, body=b"v") + MISS + MISS
    kinds = [r.kind for r in feed_whole(c, data)]
    assert kinds == [K.STORED, K.HIT, K.MISS, K.NOT_FOUND]


# -- framing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("feeder", FEEDERS)
def test_chunked_bodies(feeder: Feeder) -> None:
    c = codec(keep_payload=True)
    c.encode(Op.GET, b"k", None, bytearray())
    data = response(200, chunks=[b"hel", b"lo, ", b"world"])
    [reply] = feeder(c, data)
    assert (reply.kind, reply.payload, reply.nbytes) == (K.HIT, b"hello, world", len(data))


def test_chunked_with_extensions_trailers_and_upper_hex() -> None:
    c = codec(keep_payload=True)
    c.encode(Op.GET, b"k", None, bytearray())
    body = b"A;name=v\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n"
    [reply] = feed_bytewise(c, head + body)
    assert reply.payload == b"0123456789"


def test_chunked_store_reply_not_stored() -> None:
    c = codec()
    c.encode(Op.ADD, b"k", b"v", bytearray())
    [reply] = feed_whole(c, response(200, chunks=[b"NOT_", b"STORED\r\n"]))
    assert reply.kind == K.NOT_STORED


@pytest.mark.parametrize(
    "body",
    [b"zz\r\nab\r\n0\r\n\r\n", b"2\r\nabX\r\n0\r\n\r\n", b"0x2\r\nab\r\n0\r\n\r\n",
     b"2\r\nab\r\n0\r\nbad trailer\r\n\r\n", b"12345678901234567\r\n"],
)  # fmt: skip
def test_bad_chunked_framing_is_a_protocol_error(body: bytes) -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body)
    with pytest.raises(ProtocolError):
        c.next_reply()


def test_chunked_body_over_the_bound_is_too_large() -> None:
    c = codec(max_reply_bytes=10)
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n8\r\n")
    with pytest.raises(ReplyTooLarge):
        c.next_reply()


def test_header_names_and_values_are_case_and_space_insensitive() -> None:
    c = codec(keep_payload=True)
    c.encode(Op.GET, b"k", None, bytearray())
    data = b"HTTP/1.1 200 OK\r\ncontent-LENGTH:   3  \r\nCONNECTION: Keep-Alive\r\n\r\nabc"
    [reply] = feed_whole(c, data)
    assert reply.payload == b"abc" and not c.closing


def test_repeated_equal_content_lengths_are_one() -> None:
    c = codec(keep_payload=True)
    c.encode(Op.GET, b"k", None, bytearray())
    [reply] = feed_whole(c, b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nab")
    assert reply.payload == b"ab"


def test_interim_responses_are_skipped() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n" + MISS
    assert [r.kind for r in feed_bytewise(c, data)] == [K.MISS]


@pytest.mark.parametrize("feeder", FEEDERS)
def test_interim_responses_count_in_the_size_of_the_reply_they_precede(feeder: Feeder) -> None:
    """Before: a reply's size left out the 1xx responses before it, so the bytes by op fell
    short of what the server sent for the request (the compiled pump counted them)."""
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n"
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.encode(Op.GET, b"k", None, bytearray())
    assert [r.nbytes for r in feeder(c, interim + MISS + MISS)] == [len(interim + MISS), len(MISS)]
    fast = codec()  # read_kinds, a response head it has seen (framed in place) included
    for _ in range(3):
        fast.encode(Op.GET, b"k", None, bytearray())
    fast.feed(MISS + interim)
    kinds: list[int] = []
    sizes: list[int] = []
    fast.read_kinds(kinds, sizes)
    fast.feed(MISS + MISS)
    fast.read_kinds(kinds, sizes)
    assert sizes == [len(MISS), len(interim + MISS), len(MISS)]


def test_close_delimited_body_ends_at_eof() -> None:
    c = codec(keep_payload=True)
    c.encode(Op.GET, b"k", None, bytearray())
    assert feed_whole(c, b"HTTP/1.1 200 OK\r\n\r\nhel") == []
    c.feed(b"lo")
    assert c.next_reply() is NEED_DATA
    c.feed_eof()
    [reply] = drain(c)
    assert (reply.kind, reply.payload) == (K.HIT, b"hello")
    assert c.closing


# -- connection close -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [response(200, body=b"v", connection="close"),
     response(200, body=b"v", connection="Upgrade, Close"),
     response(200, body=b"v", version="1.0", connection=None)],
)  # fmt: skip
def test_a_response_that_closes_is_returned_and_marks_closing(data: bytes) -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.encode(Op.GET, b"k", None, bytearray())
    [reply] = feed_whole(c, data)
    assert reply.kind == K.HIT
    assert c.closing
    assert c.next_reply() is NEED_DATA  # the second request is lost: the server closes
    c.feed_eof()
    with pytest.raises(ProtocolError, match="1 replies pending"):
        c.next_reply()


def test_http_1_0_keep_alive_stays_open() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    feed_whole(c, response(200, body=b"v", version="1.0", connection="keep-alive"))
    assert not c.closing


def test_bytes_after_a_closing_response_are_a_protocol_error() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(response(400, "Bad Request", connection="close") + MISS)
    assert c.next_reply().kind == K.ERROR_REPLY  # type: ignore[union-attr]
    with pytest.raises(ProtocolError, match="closed the connection"):
        c.next_reply()


def test_eof_after_every_reply_is_clean() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    feed_whole(c, MISS)
    c.feed_eof()
    assert c.next_reply() is NEED_DATA
    with pytest.raises(ProtocolError, match="after EOF"):
        c.feed(b"x")


# -- failures ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"hello world\r\n\r\n", b"HTTP/2 200\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
     b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
     b"HTTP/1.1 101 Switching Protocols\r\n\r\n", b"\x00\x01\x02", b"GET / HTTP/1.1"],
)  # fmt: skip
def test_garbage_is_a_protocol_error_and_the_codec_is_dead_after(data: bytes) -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(data)
    with pytest.raises(ProtocolError):
        c.next_reply()
    with pytest.raises(ProtocolError):
        c.next_reply()
    with pytest.raises(ProtocolError):
        c.feed(MISS)
    with pytest.raises(ProtocolError):
        c.read_kinds([])


def test_garbage_is_caught_before_a_whole_head_arrives() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTX")
    with pytest.raises(ProtocolError, match="not an HTTP"):
        c.next_reply()


def test_oversized_head_is_too_large() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * MAX_HEAD_BYTES)
    with pytest.raises(ReplyTooLarge):
        c.next_reply()


def test_complete_oversized_head_is_too_large() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n")
    with pytest.raises(ReplyTooLarge):
        c.next_reply()


def test_content_length_over_the_bound_is_too_large() -> None:
    c = codec(max_reply_bytes=100)
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n")
    with pytest.raises(ReplyTooLarge):
        c.next_reply()


def test_close_delimited_body_over_the_bound_is_too_large() -> None:
    c = codec(max_reply_bytes=4)
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"HTTP/1.1 200 OK\r\n\r\n12345")
    with pytest.raises(ReplyTooLarge):
        c.next_reply()


@pytest.mark.parametrize("cut", [1, 10, len(MISS) - 1])
def test_eof_mid_reply_is_a_protocol_error(cut: int) -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(MISS[:cut])
    assert c.next_reply() is NEED_DATA
    c.feed_eof()
    with pytest.raises(ProtocolError, match="cut short"):
        c.next_reply()


def test_eof_mid_chunked_body_is_a_protocol_error() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(response(200, chunks=[b"abc"])[:-3])
    assert c.next_reply() is NEED_DATA
    c.feed_eof()
    with pytest.raises(ProtocolError):
        c.next_reply()


def test_a_response_with_no_request_pending_is_a_protocol_error() -> None:
    c = codec()
    c.feed(MISS)
    with pytest.raises(ProtocolError, match="no request pending"):
        c.next_reply()


def test_read_kinds_appends_the_replies_before_the_bad_bytes() -> None:
    c = codec()
    c.encode(Op.GET, b"k", None, bytearray())
    c.encode(Op.GET, b"k", None, bytearray())
    c.feed(MISS + b"garbage\r\n\r\n")
    kinds: list[int] = []
    with pytest.raises(ProtocolError):
        c.read_kinds(kinds)
    assert kinds == [int(K.MISS)]


# -- bounds and caches ------------------------------------------------------------------------


def test_a_chunk_line_longer_than_the_bound_is_a_protocol_error() -> None:
    for tail in (b"1;" + b"x" * 5000, b"1;" + b"x" * 5000 + b"\r\n"):
        c = codec()
        c.encode(Op.GET, b"k", None, bytearray())
        c.feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + tail)
        with pytest.raises(ProtocolError, match="chunk line longer"):
            c.next_reply()


def test_version_without_a_server_field() -> None:
    c = codec()
    c.encode_version(bytearray())
    feed_whole(c, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert c.server_software == ""


def test_bytearray_values_and_interim_response_in_one_read() -> None:
    c = codec()
    out = bytearray()
    c.encode(Op.SET, b"k", bytearray(b"a b"), out)
    assert out.startswith(b"GET /memc?cmd=set&key=k&val=agb ")
    [reply] = feed_whole(c, b"HTTP/1.1 100 Continue\r\n\r\n" + response(201, "Created"))
    assert reply.kind == K.STORED


def test_many_distinct_replies_through_next_reply() -> None:
    # Past the reply cache and head cache limits, and past FIFO compaction.
    c = codec()
    n = 1500
    for _ in range(n + 600):
        c.encode(Op.GET, b"k", None, bytearray())
    c.feed(b"".join(response(200, body=b"x" * i) for i in range(n)))
    replies = drain(c)
    assert [r.nbytes for r in replies] == [len(response(200, body=b"x" * i)) for i in range(n)]
    assert c.pending() == 600
