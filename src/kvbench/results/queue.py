"""A queue run's own section of its ``RunResult``: delivery, end-to-end latency, backlog.

A queue run is a run (mode ``queue``): its intervals are ordinary snapshots of the ``put``
and ``get`` requests, and what only a queue has lives here, stored with it
(``to_json``/``from_json``; the store keeps it in ``runs.queue``). Everything the reports
show of it is computed from this and the run (report/queue_figures.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvbench.metrics.delivery import DeliveryReport, ProducerDelivery
from kvbench.metrics.histogram import Histogram
from kvbench.results.encoding import histogram_from_json, histogram_to_json


@dataclass(frozen=True, slots=True)
class QueueInterval:
    """One interval's queue figures, merged across producers and consumers.

    Attributes:
        index: the interval's number (the run's ``intervals[index]`` holds its put and get
            counts and request latencies).
        e2e: end-to-end latency of the messages received in it, or None.
        stored_total, received_total: messages acknowledged / received by the interval's
            end, cumulative.
        server_backlog: the queue's length by the server's own count, when it could say.
        backlog_base: the messages of earlier phases acknowledged and not yet received
            when this run started (a preset's drain reads what its write stored); None:
            the client cannot know the backlog (a drain of messages no run of it stored).
    """

    index: int
    e2e: Histogram | None
    stored_total: int
    received_total: int
    server_backlog: int | None = None
    backlog_base: int | None = 0

    @property
    def backlog(self) -> int | None:
        """Acknowledged but not yet received, at the interval's end (the client's view);
        None when the client cannot know it (then only the server's count says)."""
        if self.backlog_base is None:
            return None
        return max(0, self.backlog_base + self.stored_total - self.received_total)


@dataclass(slots=True)
class QueueSection:
    """What a queue run adds to a run.

    Attributes:
        produce_end_ns: the last put acknowledgement (the produce window runs from the
            run's start to here).
        consume_start_ns: when consumers started dequeuing (None: they never did).
        consume_end_ns: the last message received (the consume window ends here).
        intervals: per interval, in the order of the run's intervals.
        delivery: lost / duplicated / out-of-order accounting, per producer.
        foreign: messages dequeued that were not this run's.
        empties: dequeues that found the queue empty.
        unknown_fate: gets that may have dequeued a message and were never answered (timed
            out, or in flight on a connection that broke): as many acknowledged messages
            not received are of unknown fate, not lost.
        late_received: messages that came in answers to gets that had timed out.
        consumers: per consumer: ``consumer``, ``received``, ``foreign``, ``empties``,
            ``out_of_order``.
        backlog_peak, backlog_peak_ns: the largest backlog at any instant a worker
            reported (metrics/backlog.py), and that instant; None when the client cannot
            know the backlog (``QueueInterval.backlog_base``).
        backlog_series: (seconds from the start, backlog) every 100 ms.
        drained: the run went on until every message was received or the queue stayed
            empty for the grace period; False when a limit or Ctrl-C ended it first.
        stop_reason: why the consumers stopped.
        carried_producers: ledger rows of earlier phases of the same experiment (a
            preset's write before its drain): ``delivery`` is the one ledger of them all,
            its first rows theirs, the rest this run's producers.
        carried_received: receipts folded into that ledger before this run.
    """

    produce_end_ns: int
    consume_start_ns: int | None
    consume_end_ns: int
    intervals: list[QueueInterval]
    delivery: DeliveryReport
    foreign: int = 0
    empties: int = 0
    unknown_fate: int = 0
    late_received: int = 0
    consumers: list[dict[str, Any]] = field(default_factory=list)
    backlog_peak: int | None = 0
    backlog_peak_ns: int | None = None
    backlog_series: list[tuple[float, int]] = field(default_factory=list)
    drained: bool = True
    stop_reason: str = ""
    carried_producers: int = 0
    carried_received: int = 0

    def fates(self) -> tuple[int, int, int]:
        """The acknowledged messages not received, told apart: (lost, unknown fate, in
        flight). Gets never answered may have taken as many of them (unknown fate); of the
        rest, in a run that drained the queue, each is lost; in one a limit or Ctrl-C ended
        first, each was in flight (still queued, or on its way) when it ended."""
        missing = self.delivery.totals()["lost"]
        unknown = min(missing, self.unknown_fate)
        rest = missing - unknown
        return (rest, unknown, 0) if self.drained else (0, unknown, rest)

    def own_produced(self) -> int:
        """Puts this run's producers had stored (the ledger's rows after the carried)."""
        return sum(row.produced for row in self.delivery.producers[self.carried_producers :])

    def own_received(self) -> int:
        """Messages of the run tag received in this run (duplicates included)."""
        return self.delivery.totals()["received"] - self.carried_received

    def e2e_total(self) -> Histogram | None:
        """Every interval's end-to-end latencies merged (None: no message received)."""
        parts = [i.e2e for i in self.intervals if i.e2e is not None]
        return Histogram.merged(parts) if parts else None

    def to_json(self) -> dict[str, Any]:
        """The section as a JSON-ready dict (histograms: results/encoding.py)."""
        delivery = self.delivery
        return {
            "produce_end_ns": self.produce_end_ns,
            "consume_start_ns": self.consume_start_ns,
            "consume_end_ns": self.consume_end_ns,
            "intervals": [
                {
                    "index": i.index,
                    "e2e": histogram_to_json(i.e2e) if i.e2e is not None else None,
                    "stored_total": i.stored_total,
                    "received_total": i.received_total,
                    "server_backlog": i.server_backlog,
                    "backlog_base": i.backlog_base,
                }
                for i in self.intervals
            ],
            "delivery": {
                "producers": [asdict(row) for row in delivery.producers],
                "unexpected": delivery.unexpected,
                "out_of_order_by_consumer": {
                    str(c): n for c, n in delivery.out_of_order_by_consumer.items()
                },
            },
            "foreign": self.foreign,
            "empties": self.empties,
            "unknown_fate": self.unknown_fate,
            "late_received": self.late_received,
            "consumers": self.consumers,
            "backlog_peak": self.backlog_peak,
            "backlog_peak_ns": self.backlog_peak_ns,
            "backlog_series": [list(point) for point in self.backlog_series],
            "drained": self.drained,
            "stop_reason": self.stop_reason,
            "carried_producers": self.carried_producers,
            "carried_received": self.carried_received,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> QueueSection:
        """``to_json`` read back."""
        delivery = data["delivery"]
        return cls(
            produce_end_ns=int(data["produce_end_ns"]),
            consume_start_ns=data["consume_start_ns"],
            consume_end_ns=int(data["consume_end_ns"]),
            intervals=[
                QueueInterval(
                    index=int(i["index"]),
                    e2e=histogram_from_json(i["e2e"]) if i["e2e"] is not None else None,
                    stored_total=int(i["stored_total"]),
                    received_total=int(i["received_total"]),
                    server_backlog=i["server_backlog"],
                    backlog_base=i.get("backlog_base", 0),
                )
                for i in data["intervals"]
            ],
            delivery=DeliveryReport(
                tuple(
                    ProducerDelivery(**{**row, "lost_examples": tuple(row["lost_examples"])})
                    for row in delivery["producers"]
                ),
                int(delivery["unexpected"]),
                {int(c): int(n) for c, n in delivery["out_of_order_by_consumer"].items()},
            ),
            foreign=int(data["foreign"]),
            empties=int(data["empties"]),
            unknown_fate=int(data.get("unknown_fate", 0)),
            late_received=int(data.get("late_received", 0)),
            consumers=list(data["consumers"]),
            backlog_peak=None if data["backlog_peak"] is None else int(data["backlog_peak"]),
            backlog_peak_ns=data["backlog_peak_ns"],
            backlog_series=[(float(t), int(n)) for t, n in data["backlog_series"]],
            drained=bool(data["drained"]),
            stop_reason=str(data["stop_reason"]),
            carried_producers=int(data.get("carried_producers", 0)),
            carried_received=int(data.get("carried_received", 0)),
        )


def section_from_document(document: dict[str, Any], start_ns: int) -> QueueSection:
    """The section of a queue run stored before sections were (migration 0007): rebuilt
    from its stored result document, which kept every figure but the per-interval
    end-to-end histograms and cumulative counts. The whole run's end-to-end histogram
    stands as the last interval's and each interval's backlog as its ``stored_total``, so
    the run's figures come out as they were printed (the end-to-end max and mean to the
    histogram's precision: the document kept no exact scalars)."""
    queue, rows = document["queue"], document.get("intervals", [])
    whole = queue.get("e2e_latency_hdr")
    intervals = [
        QueueInterval(
            index=k,
            e2e=Histogram.decode(whole.encode()) if whole and k == len(rows) - 1 else None,
            stored_total=int(row.get("backlog", 0)),
            received_total=0,
            server_backlog=row.get("server_backlog"),
        )
        for k, row in enumerate(rows)
    ]
    consume_s, produce_s = queue.get("consume_window_s", 0.0), queue.get("produce_window_s", 0.0)
    known = set(ProducerDelivery.__dataclass_fields__)
    rows_of = [
        ProducerDelivery(
            **{
                **{k: v for k, v in row.items() if k in known},
                # the ledger's count: acknowledged and not received (``lost`` says what of
                # it was lost; documents before ``not_received`` had only that)
                "lost": row.get("not_received", row["lost"]),
                "lost_examples": tuple(row.get("lost_examples", ())),
            }
        )
        for row in queue["producers"]
    ]
    return QueueSection(
        produce_end_ns=start_ns + round(produce_s * 1e9),
        consume_start_ns=start_ns,
        consume_end_ns=start_ns + round(consume_s * 1e9),
        intervals=intervals,
        delivery=DeliveryReport(
            tuple(rows_of),
            int(queue.get("unexpected", 0)),
            {int(c["consumer"]): int(c.get("out_of_order") or 0) for c in queue["consumers"]},
        ),
        foreign=int(queue.get("foreign", 0)),
        empties=int(queue.get("empty_polls", 0)),
        consumers=list(queue["consumers"]),
        backlog_peak=int(queue["backlog"]["peak"]),
        backlog_peak_ns=None
        if queue["backlog"].get("peak_t_s") is None
        else start_ns + round(queue["backlog"]["peak_t_s"] * 1e9),
        backlog_series=[(float(t), int(n)) for t, n in queue["backlog"].get("series", [])],
        drained=bool(queue["drained"]),
        stop_reason=str(queue.get("stop_reason", "")),
    )
