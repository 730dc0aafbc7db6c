"""The fixed vocabulary of per-op outcomes.

Values 1..20 equal ``protocols.base.ReplyKind`` (a test checks it), so the engine counts a
reply with ``counts[op][reply.kind]`` and no translation; the rest are outcomes only the
engine can observe. A miss is an outcome, not an error.
"""

from __future__ import annotations

import enum


class Outcome(enum.IntEnum):
    """What became of one op."""

    HIT = 1
    MISS = 2
    STORED = 3
    NOT_STORED = 4
    EXISTS = 5
    NOT_FOUND = 6
    DELETED = 7
    TOUCHED = 8
    OK = 9
    VALUE = 10
    ERROR_REPLY = 20
    TIMEOUT = 21  # no reply within --timeout; enters the latency histogram at the timeout
    CONN_ERROR = 22  # in flight when the connection broke (reset, EOF, closed by us)
    DROPPED = 23  # open loop: not sent, too far behind schedule
    LATE = 24  # open loop: sent behind its slot (also counted in its reply's outcome)
    MISMATCH = 25  # --verify: a get hit whose value is not ours (also counted as its hit)
    # Redis Cluster redirects: the driver sends the request on to the node they name and
    # counts them as worker stats (moved, ask); the request ends with the reply it gets
    # there. Never counted as an outcome.
    MOVED = 26
    ASK = 27
    # In flight when the server's replies broke the protocol (a reply no request in flight
    # can get, bad framing): the connection is discarded, and the replies read with the
    # one that broke it are attributed to no request. 28, after the others: a stored run
    # names its outcomes, and runs from before it (their protocol errors were conn_error)
    # read as they were.
    PROTOCOL_ERROR = 28


N_OUTCOMES = max(Outcome) + 1
OUTCOME_NAMES: dict[int, str] = {int(o): o.name.lower() for o in Outcome}

# Outcomes that count as errors in totals and error rates. LATE is a pacing note on a
# request that still completed, so it is not one.
ERROR_OUTCOMES = frozenset(
    {
        Outcome.ERROR_REPLY,
        Outcome.TIMEOUT,
        Outcome.CONN_ERROR,
        Outcome.PROTOCOL_ERROR,
        Outcome.DROPPED,
    }
)
# Replies that answer the op: they count in throughput. An error reply is a reply but not
# a success (docs/measurement.md, "The window and throughput").
SUCCESS_OUTCOMES = frozenset(o for o in Outcome if o < Outcome.ERROR_REPLY)
# Notes counted besides an op's real outcome: they never end a request on their own.
NOTE_OUTCOMES = frozenset({Outcome.LATE, Outcome.MISMATCH})
# Replies that pass a request on to another node: it has not ended.
REDIRECT_OUTCOMES = frozenset({Outcome.MOVED, Outcome.ASK})
# Outcomes that end a request (everything but the notes and redirects).
FINAL_OUTCOMES = frozenset(o for o in Outcome if o not in NOTE_OUTCOMES | REDIRECT_OUTCOMES)
