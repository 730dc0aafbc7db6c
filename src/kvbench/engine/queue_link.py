"""Queue traffic on one connection: a producer's puts or a consumer's gets, closed loop.

``QueueLink`` is the driver (in-flight send times, timeouts, transport failures as
counters) on the ``Link`` every driver shares (engine/link.py: transport, codec, setup,
refusals, closing); ``Producer`` and ``Consumer`` are its two roles. The codecs are the existing ones:
memcacheq is the memcached text codec (``set QUEUE`` / ``get QUEUE``; an empty queue's
``END`` is a MISS), Redis lists are ``RespQueueCodec`` (LPUSH / RPOP / BRPOP).
Hot path: one clock read per socket read and per write batch; replies recorded by
appending to the recorder's arrays.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable
from itertools import repeat
from operator import sub
from typing import TypeAlias

from kvbench.config.queue import QueueConfig
from kvbench.engine.link import Link, LinkHost
from kvbench.engine.setup import setup_for
from kvbench.errors import ProtocolError
from kvbench.metrics.outcome import Outcome
from kvbench.metrics.recorder import Recorder
from kvbench.protocols.base import NEED_DATA, ClientCodec, CodecOptions, Op, ReplyKind
from kvbench.protocols.memcache_text import MemcacheTextCodec
from kvbench.protocols.resp_queue import RespQueueCodec
from kvbench.workload.queue import HEADER, HEADER_BYTES, MAGIC, MessageFormat

_now = time.monotonic_ns
# Op numbers in the queue recorder.
PUT, GET = 0, 1
QUEUE_OPS = ("put", "get")
_STORED = int(ReplyKind.STORED)
_HIT = ReplyKind.HIT
_MISS = ReplyKind.MISS
_TIMEOUT = int(Outcome.TIMEOUT)
# Drop answered entries from the front of the in-flight lists once this many pile up.
_COMPACT_AT = 4096


class QueueCommands:
    """How one backend enqueues and dequeues, written through a codec; and the server.

    Args:
        config: the queue run's config (target, backend, queue name, BRPOP block time).

    Attributes:
        target: the server; setup: its connections' setup writer (AUTH/SELECT/HELLO).
    """

    def __init__(self, config: QueueConfig) -> None:
        self.target = config.target
        self.setup = setup_for(config.target)
        self.backend = config.backend
        self._queue = config.queue.encode("utf-8")
        options = CodecOptions(keep_payload=True)
        if config.backend == "memcacheq":
            self.codec_factory: Callable[[], ClientCodec] = lambda: MemcacheTextCodec(options)
            self._get_argv: tuple[bytes, ...] = ()
        else:
            resp = 3 if config.target.protocol == "resp3" else 2
            self.codec_factory = lambda: RespQueueCodec(options, resp)
            if config.block_ns is None:
                self._get_argv = (b"RPOP", self._queue)
            else:
                # BRPOP's timeout is in seconds; Redis >= 6 takes a decimal.
                seconds = b"%.3f" % (config.block_ns / 1e9)
                self._get_argv = (b"BRPOP", self._queue, seconds)

    def put(self, codec: ClientCodec, value: bytes, out: bytearray) -> None:
        """Append one enqueue: ``set QUEUE 0 0 n`` or ``LPUSH LIST value``."""
        if self.backend == "memcacheq":
            codec.encode(Op.SET, self._queue, value, out)
        else:
            codec.encode(Op.COMMAND, (b"LPUSH", self._queue, value), None, out)

    def get(self, codec: ClientCodec, n: int, out: bytearray) -> None:
        """Append ``n`` dequeues: ``get QUEUE``, ``RPOP LIST`` or ``BRPOP LIST timeout``."""
        if self.backend == "memcacheq":
            codec.encode_many([int(Op.GET)] * n, [self._queue] * n, [None] * n, 0, n, out)
        else:
            for _ in range(n):
                codec.encode(Op.COMMAND, self._get_argv, None, out)


class QueueLink(Link):
    """One connection of a producer or consumer; reopened by its worker when it breaks.

    Args:
        host: the worker.
        commands: the backend's enqueue/dequeue writers, codec factory and server.
        recorder: counters and latency arrays for ``put`` and ``get``.
        pipeline: requests kept in flight.
    """

    op = PUT

    def __init__(
        self, host: LinkHost, commands: QueueCommands, recorder: Recorder, pipeline: int
    ) -> None:
        super().__init__(host, commands.target, None, commands.codec_factory, commands.setup)
        self._commands = commands
        self._recorder = recorder
        self.pipeline = pipeline
        self._sent_ns: list[int] = []
        self._head = 0
        self.issuing = False
        # Timed-out requests whose late replies are still read (a consumer's), and until
        # when: a reply to them comes before any other on this connection.
        self._late = 0
        self._linger_until_ns: int | None = None

    @property
    def inflight(self) -> int:
        return len(self._sent_ns) - self._head

    # -- replies ---------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._watching:
            self._watch_read(data)
        now = _now()
        try:
            self._codec.feed(data)
            if self._setup_left:
                self._receive_setup()
                return
            self._on_replies(now)
        except ProtocolError as exc:
            if not self._refused:  # a refusal is counted as one when the server closes
                self._host.note_error("protocol_error", str(exc))
            self.close()
            return
        self._compact()
        self._host.maybe_finished()

    def _on_replies(self, now: int) -> None:
        raise NotImplementedError

    # -- failures --------------------------------------------------------------------

    def check_timeout(self, now: int, timeout_ns: int) -> None:
        """Count requests unanswered for ``timeout_ns`` as timeouts (``_timed_out`` decides
        what becomes of the connection); end a wait for late replies that ran out.

        Replies come back in order, so the ones behind a stuck request are stuck too.
        """
        if self._linger_until_ns is not None and now >= self._linger_until_ns:
            self._linger_until_ns = None
            self.close()  # the late replies did not come: their fate stays unknown
            return
        if self._head >= len(self._sent_ns) or now - self._sent_ns[self._head] < timeout_ns:
            return
        counts = self._recorder.counts[self.op]
        latencies = self._recorder.latency_ns[self.op]
        first = self._head
        while self._head < len(self._sent_ns) and now - self._sent_ns[self._head] >= timeout_ns:
            counts[_TIMEOUT] += 1
            latencies.append(timeout_ns)
            self._head += 1
        self._timed_out(now, timeout_ns, first, self._head)

    def _timed_out(self, now: int, timeout_ns: int, first: int, stop: int) -> None:
        """The requests ``first .. stop - 1`` timed out: by default they get no reply, and
        the connection is dropped (the ones behind them count as ``conn_error``)."""
        for index in range(first, stop):
            self._forget(index)
        self.close()

    @property
    def awaiting(self) -> int:
        """Requests whose reply may still come: in flight, and timed out but waited for."""
        return self.inflight + self._late

    def _fail_inflight(self, outcome: int) -> None:
        self._recorder.counts[self.op][outcome] += self.inflight
        for index in range(self._head, len(self._sent_ns)):
            self._forget(index)
        self._clear()

    def _forget(self, index: int) -> None:
        """The request at ``index`` will get no reply (timeout or broken connection)."""

    def _clear(self) -> None:
        self._sent_ns.clear()
        self._head = 0

    def _compact(self) -> None:
        head = self._head
        if head >= _COMPACT_AT and head * 2 >= len(self._sent_ns):
            del self._sent_ns[:head]
            self._head = 0


# ``QueueLink``'s arguments, in its order: what ``Producer`` and ``Consumer`` pass on.
QueueLinkArgs: TypeAlias = "tuple[LinkHost, QueueCommands, Recorder, int]"


class Producer(QueueLink):
    """Sends its ``quota`` messages, seq 0 .. quota-1, keeping ``pipeline`` puts in flight.

    Attributes:
        next_seq: the next message's sequence number (= messages sent).
        stored: puts the server acknowledged.
        unacknowledged: seqs of puts answered otherwise, timed out, or lost in flight:
            they may or may not be in the queue.
        first_send_ns, last_ack_ns: the producer's first write and last acknowledgement.
    """

    op = PUT

    def __init__(self, *link: *QueueLinkArgs, message_format: MessageFormat, quota: int) -> None:
        super().__init__(*link)
        self._format = message_format
        self.quota = quota
        self.next_seq = 0
        self._seqs: list[int] = []
        self._codes: list[int] = []
        self.stored = 0
        self.unacknowledged: list[int] = []
        self.first_send_ns: int | None = None
        self.last_ack_ns = 0

    @property
    def exhausted(self) -> bool:
        """Every message was sent and answered (or given up on)."""
        return self.next_seq >= self.quota and self.inflight == 0

    def fill(self) -> None:
        if not self.issuing or self._transport is None:
            return
        n = min(self.pipeline - self.inflight, self.quota - self.next_seq)
        if n <= 0:
            return
        now = _now()
        if self.first_send_ns is None:
            self.first_send_ns = now
        build = self._format.build
        put = self._commands.put
        codec = self._codec
        out = bytearray()
        first = self.next_seq
        for seq in range(first, first + n):
            put(codec, build(seq, now), out)
        self._seqs.extend(range(first, first + n))
        self._sent_ns.extend(repeat(now, n))
        self.next_seq = first + n
        self._transport.write(out)

    def _on_replies(self, now: int) -> None:
        """Account the puts just answered, in bulk, and send more.

        Raises:
            ProtocolError: garbage, or a reply to no put in flight. The replies before it
                answered puts and are counted; the caller closes the connection.
        """
        try:
            self._codec.read_kinds(self._codes)
        except ProtocolError:
            self._take_codes(now)
            raise
        if surplus := self._take_codes(now):
            raise ProtocolError(f"{surplus} more replies than puts in flight")
        self.fill()

    def _take_codes(self, now: int) -> int:
        """Account the parsed replies (``self._codes``) against the puts in flight.

        Returns:
            How many replies were left over, answering no put (not counted anywhere).
        """
        codes = self._codes
        surplus = max(0, len(codes) - self.inflight)
        if surplus:
            del codes[len(codes) - surplus :]
        if codes:
            self._account(now, len(codes))
            codes.clear()
        return surplus

    def _account(self, now: int, done: int) -> None:
        codes = self._codes
        head = self._head
        stop = head + done
        recorder = self._recorder
        recorder.reply_ops.extend(repeat(PUT, done))
        recorder.reply_codes.extend(codes)
        recorder.reply_latency_ns.extend(map(sub, repeat(now, done), self._sent_ns[head:stop]))
        stored = codes.count(_STORED)
        if stored != done:
            for i, code in enumerate(codes):
                if code != _STORED:
                    self.unacknowledged.append(self._seqs[head + i])
                    self._host.note_error("put_not_stored", self._refusal(code))
        if stored:
            self.stored += stored
            self.last_ack_ns = now
        self._head = stop

    def _refusal(self, code: int) -> str:
        """A put's answer other than stored, in the server's words where the codec kept
        them (``SERVER_ERROR out of memory storing object``: memcacheq's reply to a
        message longer than its ``-B``)."""
        kind = ReplyKind(code & 0xFF)
        text = self._codec.last_error if kind is ReplyKind.ERROR_REPLY else None
        if text:
            return "a put was refused: " + bytes(text).decode("utf-8", "backslashreplace")
        return f"a put was answered {kind.name.lower()}"

    def _forget(self, index: int) -> None:
        self.unacknowledged.append(self._seqs[index])

    def _clear(self) -> None:
        super()._clear()
        self._seqs.clear()

    def _compact(self) -> None:
        head = self._head
        if head >= _COMPACT_AT and head * 2 >= len(self._sent_ns):
            del self._seqs[:head]
        super()._compact()


class Consumer(QueueLink):
    """Keeps ``pipeline`` dequeues in flight and records every message it gets.

    A read that brought a message refills the pipeline at once; one that found the queue
    empty refills it after ``poll_interval_ns`` (0 with BRPOP, which waits on the server).

    Attributes:
        producers, seqs: the (producer, seq) of each message received since the worker
            last took them, in order of receipt.
        e2e_ns: receive time - send time of those messages.
        received: messages of this run received; foreign: messages of other runs or tools.
        empties: dequeues that found the queue empty.
        empty_since_ns: when the current run of empty answers began (None after a message).
        last_empty_ns: when the latest empty answer came (with ``empty_since_ns``: an
            empty read this long after the first, nothing in between, confirms the queue
            empty).
        last_receive_ns: when the last message arrived.
        unknown_fate: gets that may have dequeued a message and whose answer never came
            (timed out and not answered while waited for, or in flight on a connection
            that broke): their messages are neither received nor lost.
        late_received: messages brought by answers to gets that had timed out.

    A get that times out may have taken a message the server will still send: the
    consumer stops asking on that connection and reads the late answers (replies come in
    order) for up to another timeout; then it asks again on the same connection, or, when
    they did not all come, drops it and counts the rest as of unknown fate.
    """

    op = GET

    def __init__(self, *link: *QueueLinkArgs, run_tag: int, poll_interval_ns: int) -> None:
        super().__init__(*link)
        self._run_tag = run_tag
        self._poll_s = poll_interval_ns / 1e9
        self._timer: asyncio.TimerHandle | None = None
        self.producers: array[int] = array("I")
        self.seqs: array[int] = array("Q")
        self.e2e_ns: array[int] = array("q")
        self.received = 0
        self.foreign = 0
        self.empties = 0
        self.empty_since_ns: int | None = None
        self.last_empty_ns: int | None = None
        self.last_receive_ns = 0
        self.unknown_fate = 0
        self.late_received = 0

    def fill(self) -> None:
        if not self.issuing or self._transport is None or self._timer is not None:
            return
        if self._linger_until_ns is not None:  # reading late answers first
            return
        n = self.pipeline - self.inflight
        if n <= 0:
            return
        out = bytearray()
        self._commands.get(self._codec, n, out)
        self._sent_ns.extend(repeat(_now(), n))
        self._transport.write(out)

    def stop_issuing(self) -> None:
        self.issuing = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake(self) -> None:
        self._timer = None
        self.fill()

    def _timed_out(self, now: int, timeout_ns: int, first: int, stop: int) -> None:
        """Keep the connection and wait (up to ``timeout_ns`` more) for the late answers."""
        self._late += stop - first
        if self._linger_until_ns is None:
            self._linger_until_ns = now + timeout_ns

    def _fail_inflight(self, outcome: int) -> None:
        self.unknown_fate += self._late + self.inflight
        super()._fail_inflight(outcome)

    def _clear(self) -> None:
        super()._clear()
        self._late = 0
        self._linger_until_ns = None

    def _take_late(self, now: int) -> None:
        """Read the answers to timed-out gets (counted as timeouts already): a message
        they bring is received (its receipt and age kept), an empty answer took nothing."""
        next_reply = self._codec.next_reply
        unpack = HEADER.unpack_from
        while self._late and (reply := next_reply()) is not NEED_DATA:
            self._late -= 1
            if reply.kind is not _HIT:
                continue
            payload = reply.payload
            if payload is not None and len(payload) >= HEADER_BYTES:
                magic, run_tag, producer, seq, sent = unpack(payload)
                if magic == MAGIC and run_tag == self._run_tag:
                    self.producers.append(producer)
                    self.seqs.append(seq)
                    self.e2e_ns.append(now - sent)
                    self.received += 1
                    self.late_received += 1
                    self.last_receive_ns = now
                    continue
            self.foreign += 1

    def _on_replies(self, now: int) -> None:
        """Record every reply parsed: messages (with their receipts), empties, errors.

        Raises:
            ProtocolError: garbage, or a reply to no get in flight; the replies before
                it are recorded first. The caller closes the connection.
        """
        if self._late:
            self._take_late(now)
            if self._late:
                return
        next_reply = self._codec.next_reply
        recorder = self._recorder
        ops, codes, latencies = recorder.reply_ops, recorder.reply_codes, recorder.reply_latency_ns
        add_producer, add_seq, add_e2e = self.producers.append, self.seqs.append, self.e2e_ns.append
        unpack = HEADER.unpack_from
        tag = self._run_tag
        sent_ns = self._sent_ns
        head = self._head
        messages = empties = valid = 0
        waiting = len(sent_ns)
        error: ProtocolError | None = None
        try:
            while (reply := next_reply()) is not NEED_DATA:
                if head == waiting:  # a reply to no request: counted nowhere
                    raise ProtocolError("more replies than gets in flight")
                kind = reply.kind
                ops.append(GET)
                codes.append(kind | reply.keys << 8)
                latencies.append(now - sent_ns[head])
                head += 1
                if kind is _HIT:
                    messages += 1
                    payload = reply.payload
                    if payload is not None and len(payload) >= HEADER_BYTES:
                        magic, run_tag, producer, seq, sent = unpack(payload)
                        if magic == MAGIC and run_tag == tag:
                            add_producer(producer)
                            add_seq(seq)
                            add_e2e(now - sent)
                            valid += 1
                            continue
                    self.foreign += 1
                elif kind is _MISS:
                    empties += 1
                else:
                    text = (reply.payload or b"").decode("utf-8", "replace")
                    self._host.note_error("get_error_reply", text.strip() or "error reply")
        except ProtocolError as exc:  # the replies before it were counted
            error = exc
        self._head = head
        self.received += valid
        self.empties += empties
        if messages:
            self.last_receive_ns = now
            self.empty_since_ns = None
        if error is not None:
            raise error
        if self._linger_until_ns is not None and not self.inflight:
            self._linger_until_ns = None  # every late answer came: ask again here
            messages = max(messages, 1)
        self._ask_again(now, messages, empties)

    def _ask_again(self, now: int, messages: int, empties: int) -> None:
        """Refill at once after a read that brought a message; after an empty one, in
        ``poll_interval`` (at once when that is 0)."""
        if not messages and empties:
            if self.empty_since_ns is None:
                self.empty_since_ns = now
            self.last_empty_ns = now
            if self._poll_s > 0 and self.issuing and self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(self._poll_s, self._wake)
                return
        self.fill()

    def take_receipts(self) -> tuple[array[int], array[int]]:
        """The (producers, seqs) received since the last call; the buffers start afresh."""
        producers, seqs = self.producers, self.seqs
        self.producers, self.seqs = array("I"), array("Q")
        return producers, seqs
