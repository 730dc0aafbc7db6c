"""Delivery accounting of a queue run: lost, duplicated and out-of-order messages.

Consumers report what they received as (producer, sequence number) pairs, in the order
they received them, in chunks; ``DeliveryLedger`` folds the chunks in with numpy and keeps
one flag per planned message (a bool array per producer: 1,000,000 messages take 1 MB).
At the end, ``finish`` compares what was received with what each producer had
acknowledged. Pure: no I/O, no clock.

Definitions (docs/measurement.md, "Queue runs"):

- *lost*: acknowledged by the server (STORED / LPUSH's length) but never received.
- *duplicated*: receipts beyond the first of the same (producer, seq).
- *out of order*: on one (producer, consumer) stream, a receipt whose seq is lower than
  one that consumer already received from that producer. A FIFO queue read by one
  consumer has none; with several consumers each one's stream is still increasing.
- *unexpected*: a receipt with this run's tag but a producer or seq that was never sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# How many lost sequence numbers each producer's report lists (the first ones).
LOST_EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class ProducerDelivery:
    """One producer's delivery figures.

    Attributes:
        producer: the producer's id.
        sent: messages it sent (seq 0 .. sent-1).
        produced: of those, acknowledged by the server.
        received: receipts of its messages (duplicates included).
        unique: distinct messages received.
        lost: acknowledged and never received.
        duplicated: receipts beyond the first of a message.
        out_of_order: receipts below the highest seq already seen on the same consumer.
        lost_examples: the first few lost sequence numbers.
    """

    producer: int
    sent: int
    produced: int
    received: int
    unique: int
    lost: int
    duplicated: int
    out_of_order: int
    lost_examples: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """What a producer sent: ``sent`` messages, of which ``unacknowledged`` seqs were not stored.

    A put answered with an error reply, timed out or in flight on a broken connection is
    unacknowledged: it may or may not be in the queue, so it is never counted lost.
    """

    sent: int
    unacknowledged: tuple[int, ...] = ()


class DeliveryLedger:
    """Receipts of one queue run, folded in chunk by chunk.

    Args:
        planned: messages planned per producer (producer ids are 0 .. len(planned) - 1).
    """

    def __init__(self, planned: Sequence[int]) -> None:
        self.planned = tuple(planned)
        self._seen = [np.zeros(n, dtype=np.bool_) for n in self.planned]
        self._unique = [0] * len(self.planned)
        self._received = [0] * len(self.planned)
        self._out_of_order: dict[tuple[int, int], int] = {}
        self._stream_max: dict[tuple[int, int], int] = {}
        self.unexpected = 0

    def extend(self, planned: Sequence[int]) -> range:
        """Plan more producers (a later phase of the same run tag, one ledger for all):
        their ids follow the ones planned already. Returns their ids."""
        first = len(self.planned)
        self.planned += tuple(planned)
        self._seen += [np.zeros(n, dtype=np.bool_) for n in planned]
        self._unique += [0] * len(planned)
        self._received += [0] * len(planned)
        return range(first, len(self.planned))

    def unique_of(self, producers: range) -> int:
        """Distinct messages received so far of these producers."""
        return sum(self._unique[p] for p in producers)

    @property
    def unique_total(self) -> int:
        """Distinct messages received so far, over all producers."""
        return sum(self._unique)

    @property
    def received_total(self) -> int:
        """Receipts so far (duplicates included), over all producers."""
        return sum(self._received)

    def add(self, consumer: int, producers: Any, seqs: Any) -> None:
        """Fold in one consumer's next receipts, in the order it received them.

        Args:
            consumer: the consumer's id (its receipts form one stream per producer).
            producers: producer id of each receipt (an array, list or buffer of ints).
            seqs: sequence number of each receipt, aligned with ``producers``.
        """
        pids = np.asarray(producers, dtype=np.int64)
        numbers = np.asarray(seqs, dtype=np.int64)
        if pids.shape != numbers.shape:
            raise ValueError("producers and seqs must have the same length")
        if not pids.size:
            return
        known = (pids >= 0) & (pids < len(self.planned))
        self.unexpected += int(np.count_nonzero(~known))
        for producer in np.unique(pids[known]).tolist():
            self._add_stream(consumer, producer, numbers[pids == producer])

    def _add_stream(self, consumer: int, producer: int, seqs: npt.NDArray[np.int64]) -> None:
        in_range = (seqs >= 0) & (seqs < self.planned[producer])
        if not in_range.all():
            self.unexpected += int(np.count_nonzero(~in_range))
            seqs = seqs[in_range]
            if not seqs.size:
                return
        self._received[producer] += int(seqs.size)
        # Out of order: below the running maximum of this stream (carried across chunks).
        key = (consumer, producer)
        previous = self._stream_max.get(key, -1)
        running = np.maximum.accumulate(seqs)
        before = np.empty_like(running)
        before[0] = previous
        if seqs.size > 1:
            np.maximum(running[:-1], previous, out=before[1:])
        late = int(np.count_nonzero(seqs < before))
        if late:
            self._out_of_order[key] = self._out_of_order.get(key, 0) + late
        self._stream_max[key] = max(previous, int(running[-1]))
        seen = self._seen[producer]
        distinct = np.unique(seqs)
        self._unique[producer] += int(np.count_nonzero(~seen[distinct]))
        seen[distinct] = True

    def out_of_order_by_consumer(self) -> dict[int, int]:
        """Out-of-order receipts per consumer."""
        totals: dict[int, int] = {}
        for (consumer, _), n in self._out_of_order.items():
            totals[consumer] = totals.get(consumer, 0) + n
        return totals

    def finish(self, acknowledged: Sequence[Acknowledged]) -> DeliveryReport:
        """Every producer's figures, given what it sent and which puts were not stored.

        Receipts of seqs at or beyond a producer's ``sent`` (never sent: corruption, or a
        producer that stopped early) count as unexpected, once per distinct seq. Calling
        ``finish`` does not change the ledger.
        """
        rows = []
        unexpected = self.unexpected
        for producer, ack in enumerate(acknowledged):
            seen = self._seen[producer]
            sent = min(ack.sent, seen.size)
            beyond = int(np.count_nonzero(seen[sent:]))
            unexpected += beyond
            expected = np.ones(sent, dtype=np.bool_)
            expected[[s for s in ack.unacknowledged if 0 <= s < sent]] = False
            missing = np.flatnonzero(expected & ~seen[:sent])
            unique = self._unique[producer] - beyond
            received = self._received[producer] - beyond
            rows.append(
                ProducerDelivery(
                    producer=producer,
                    sent=sent,
                    produced=int(np.count_nonzero(expected)),
                    received=received,
                    unique=unique,
                    lost=int(missing.size),
                    duplicated=received - unique,
                    out_of_order=sum(
                        n for (_, p), n in self._out_of_order.items() if p == producer
                    ),
                    lost_examples=tuple(missing[:LOST_EXAMPLES].tolist()),
                )
            )
        return DeliveryReport(tuple(rows), unexpected, self.out_of_order_by_consumer())


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """The ledger's verdict on a run.

    Attributes:
        producers: one row per producer.
        unexpected: receipts with this run's tag naming a producer or seq never sent.
        out_of_order_by_consumer: consumer id -> its out-of-order receipts.
    """

    producers: tuple[ProducerDelivery, ...]
    unexpected: int
    out_of_order_by_consumer: dict[int, int]

    def totals(self) -> dict[str, int]:
        """Sums over producers: sent, produced, received, unique, lost, duplicated, out_of_order."""
        names = ("sent", "produced", "received", "unique", "lost", "duplicated", "out_of_order")
        sums = dict.fromkeys(names, 0)
        for row in self.producers:
            for name in names:
                sums[name] += getattr(row, name)
        return sums
