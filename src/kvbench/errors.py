"""The whole exception tree of kvbench.

::

    KvbenchError                 base; every exception kvbench defines derives from it
    ├── ConfigError              bad flag or config value; carries the config path ("load.pipeline")
    │   └── UnknownRun           a RUN argument names no stored run, or more than one
    ├── ProtocolError            a reply broke the grammar (sans-IO); the codec is dead afterwards
    │   └── ReplyTooLarge        a reply exceeded the codec's max_reply_bytes bound
    ├── TargetUnreachable        preflight: no connection could be opened to a target
    │   └── SetupRefused         the server took the connection but refused its setup
    │                            (AUTH, SELECT, HELLO); during a run it is a failed attempt
    ├── RunAborted               a phase failed; carries the phase and the cause
    │   └── WorkerFailed         a worker process exited or went silent
    ├── MessageError             coordinator <-> worker message invalid or of the wrong version
    └── StoreError               the results database could not be read or written
        └── SchemaVersionError   the database was written by a newer kvbench

Error *replies* (``ERROR``, ``-ERR``, HTTP 5xx) are never raised: codecs return them as
values and the engine counts them. Transport failures during a run are counters, not
exceptions. The CLI maps ConfigError to exit 2, TargetUnreachable to 3, RunAborted to 4,
StoreError to 5.
"""

from __future__ import annotations


class KvbenchError(Exception):
    """Base class of every exception kvbench raises on purpose."""


class ConfigError(KvbenchError):
    """A flag or config value is invalid.

    Args:
        path: where the value came from, e.g. ``"load.pipeline"`` or ``"--pipeline"``.
        message: what is wrong with it.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


class UnknownRun(ConfigError):
    """A RUN argument (an id, a prefix of one, ``last``) names no stored run, or several:
    a usage error (exit 2), not a damaged database."""

    def __init__(self, message: str) -> None:
        super().__init__("RUN", message)


class ProtocolError(KvbenchError):
    """The byte stream from the server broke the protocol's grammar."""


class ReplyTooLarge(ProtocolError):
    """A reply was larger than the codec's ``max_reply_bytes``."""


class TargetUnreachable(KvbenchError):
    """No connection could be opened to a target (refused, timed out, auth failed)."""


class SetupRefused(TargetUnreachable):
    """The server accepted a connection but refused its setup (AUTH, SELECT, HELLO).

    The message is the server's error reply. Before a run it ends the run like
    any unreachable target (exit 3); during one, the attempt is counted as failed and the
    connection is tried again.
    """


class RunAborted(KvbenchError):
    """A run phase failed.

    Args:
        phase: the phase that failed (``preflight``, ``warmup``, ``measure``, ``drain``).
        cause: one line saying why.
    """

    def __init__(self, phase: str, cause: str) -> None:
        super().__init__(f"{phase}: {cause}")
        self.phase = phase
        self.cause = cause


class WorkerFailed(RunAborted):
    """A worker process exited or stopped sending snapshots."""


class MessageError(KvbenchError):
    """A coordinator <-> worker message was malformed or of another version."""


class StoreError(KvbenchError):
    """The results database could not be read or written."""


class SchemaVersionError(StoreError):
    """The results database was written by a newer kvbench than this one."""


# The exit code of a run ended by each kind of error (the CLI's contract: README).
_EXIT_CODES: tuple[tuple[type[KvbenchError], int], ...] = (
    (ConfigError, 2),
    (TargetUnreachable, 3),
    (RunAborted, 4),
    (StoreError, 5),
)


def exit_code(exc: KvbenchError) -> int:
    """The exit code of a command that ``exc`` ended (1 for a kind without its own)."""
    return next((code for kind, code in _EXIT_CODES if isinstance(exc, kind)), 1)
