"""The share-session cache of KIP-932 share groups: Kafka's ``ShareSessionCache`` with the session
logic of ``SharePartitionManager.newContext`` (ShareFetch), ``acknowledgeSessionUpdate``
(ShareAcknowledge) and ``releaseSession``. Sans-IO: the handlers ask it whether a request's
``ShareSessionEpoch`` is acceptable and what to fetch, and release the member's acquired records
(:mod:`oncelog.groups.share_partition`) with the partitions it hands back.

A *share session* is keyed by (group id, member id), holds the set of (topic id, partition) the
member fetches, the epoch its next request must carry, and the connection that created it.

Epochs (Kafka's ``ShareRequestMetadata``):

* ShareFetch epoch **0** (INITIAL) opens a session: acknowledgements are refused (INVALID_REQUEST
  "Acknowledge data present in Initial Fetch Request"); an existing session of the key is removed
  first (its records are *not* released: as in Kafka, they stay acquired until their locks expire
  or the member acknowledges them in the new session); a full cache refuses the new one
  (SHARE_SESSION_LIMIT_REACHED; nothing is evicted). The new session expects epoch 1;
* epoch **-1** (FINAL) needs a session (SHARE_SESSION_NOT_FOUND otherwise) and changes nothing:
  the context says ``final``, the handler processes the acknowledgements, fetches nothing and
  calls :meth:`ShareSessions.release`;
* any other epoch needs a session (SHARE_SESSION_NOT_FOUND) whose expected epoch it equals
  (INVALID_SHARE_SESSION_EPOCH); then ShareFetch updates the session's partitions (added, then
  forgotten) and the epoch advances — 1, 2, ..., 2**31-1, then 1 again, never 0 (Kafka's
  ``nextEpoch``; the wrap is unverified in Kafka's source, this is the fetch-session rule);
* ShareAcknowledge refuses epoch 0 (INVALID_SHARE_SESSION_EPOCH "ShareAcknowledge Request cannot
  have epoch as INITIAL_EPOCH"), treats -1 as FINAL and otherwise checks and advances **the same
  epoch counter** as ShareFetch.

Connections. A session is bound to the connection that created it (Kafka's
``connectionIdToSessionMap``) for one purpose: when that connection closes, the session ends and
its records are released (:meth:`ShareSessions.connection_closed`). Kafka does not check the
connection of later requests, and neither does this cache: a session may be used from another
connection (a client that reconnects normally opens a new session with epoch 0, which rebinds the
key to the new connection). Closing the creating connection still ends it. Where Kafka maps a
connection to the *last* session it created and marks the mapping stale when that session goes,
this cache binds every session a connection created and forgets a binding as soon as its session
goes, which gives the same answer for one session per connection and never a wrong removal.

Invariants (``tests/groups/test_share_sessions.py``):

* at most ``max_sessions`` sessions; every index (by connection, by group) holds exactly the live
  sessions — removing or replacing a session removes every entry that names it, and no empty entry
  stays — so nothing here grows with what clients send beyond ``max_sessions`` sessions;
* a session's partitions are what the handler passes in: the handler admits only partitions of
  existing topics (Kafka's limit is the same: the cache counts them, it does not cap them);
* a refused request changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Hashable, Iterable

from kio.schema.errors import ErrorCode

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 2**31 - 1
DEFAULT_MAX_SHARE_SESSIONS = 2000  # group.share.max.share.sessions's default; the broker passes its setting

TopicIdPartition = tuple[uuid.UUID, int]
SessionKey = tuple[str, str]  # (group id, member id)


def next_epoch(epoch: int) -> int:
    """Kafka's ``ShareRequestMetadata.nextEpoch``: FINAL stays FINAL, MAX_INT wraps to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    if epoch >= MAX_EPOCH:
        return 1
    return epoch + 1


class ShareSessionError(Exception):
    """A request the session cache refuses: the handler answers ``code`` with ``message``."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int  # the epoch the member's next ShareFetch/ShareAcknowledge must carry
    connection: Hashable  # the connection that created it
    partitions: set[TopicIdPartition] = field(default_factory=set)

    @property
    def key(self) -> SessionKey:
        return self.group_id, self.member_id


@dataclass(frozen=True)
class FetchContext:
    """What a ShareFetch may do. ``initial``: a new session was opened (Kafka's full
    ``ShareSessionContext``); ``final``: epoch -1 (Kafka's ``FinalContext``) — process the
    acknowledgements, fetch nothing, then :meth:`ShareSessions.release`. ``partitions``: the
    session's partitions to fetch (empty when final). ``epoch``: what the next request must carry
    (-1 when final)."""

    group_id: str
    member_id: str
    partitions: frozenset[TopicIdPartition]
    epoch: int
    initial: bool = False
    final: bool = False


@dataclass(frozen=True)
class AckContext:
    """What a ShareAcknowledge may do: ``final`` — release the session after the acknowledgements."""

    group_id: str
    member_id: str
    epoch: int
    final: bool = False


class ShareSessions:
    """The share-session cache of one broker (see the module docstring)."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SHARE_SESSIONS) -> None:
        if max_sessions < 1:
            raise ValueError("group.share.max.share.sessions must be at least 1")
        self.max_sessions = max_sessions
        self._sessions: dict[SessionKey, ShareSession] = {}
        # dicts used as ordered sets, so answers come in creation order
        self._by_connection: dict[Hashable, dict[SessionKey, None]] = {}
        self._by_group: dict[str, dict[str, None]] = {}

    # ---- requests --------------------------------------------------------------------------------

    def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        connection: Hashable,
        partitions_added: Iterable[TopicIdPartition] = (),
        partitions_forgotten: Iterable[TopicIdPartition] = (),
        has_acks: bool = False,
    ) -> FetchContext:
        """A ShareFetch's session step (Kafka's ``newContext``). Raises :class:`ShareSessionError`.
        On epoch -1 the request's partitions are ignored (Kafka's ``FinalContext`` reads none)."""
        key = (group_id, member_id)
        if epoch == FINAL_EPOCH:
            self._existing(key)
            return FetchContext(group_id, member_id, frozenset(), FINAL_EPOCH, final=True)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise ShareSessionError(
                    ErrorCode.invalid_request, "Acknowledge data present in Initial Fetch Request")
            # Kafka removes the old session before checking the limit: a replacement always fits
            self._remove(key)
            if len(self._sessions) >= self.max_sessions:
                raise ShareSessionError(
                    ErrorCode.share_session_limit_reached,
                    f"Could not create a share session for group {group_id} member {member_id}: "
                    f"the cache holds {self.max_sessions} sessions")
            session = ShareSession(group_id, member_id, next_epoch(INITIAL_EPOCH), connection,
                                   set(partitions_added))
            self._add(session)
            return FetchContext(group_id, member_id, frozenset(session.partitions), session.epoch,
                                initial=True)
        session = self._existing(key)
        self._check_epoch(session, epoch)
        session.partitions.update(partitions_added)
        session.partitions.difference_update(partitions_forgotten)
        session.epoch = next_epoch(session.epoch)
        return FetchContext(group_id, member_id, frozenset(session.partitions), session.epoch)

    def acknowledge(self, group_id: str, member_id: str, epoch: int, connection: Hashable) -> AckContext:
        """A ShareAcknowledge's session step (Kafka's ``acknowledgeSessionUpdate``). ``connection``
        is not checked (see the module docstring). Raises :class:`ShareSessionError`."""
        del connection  # accepted for symmetry with fetch; Kafka does not check it either
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                "ShareAcknowledge Request cannot have epoch as INITIAL_EPOCH")
        session = self._existing((group_id, member_id))
        if epoch == FINAL_EPOCH:
            return AckContext(group_id, member_id, FINAL_EPOCH, final=True)
        self._check_epoch(session, epoch)
        session.epoch = next_epoch(session.epoch)
        return AckContext(group_id, member_id, session.epoch)

    def release(self, group_id: str, member_id: str) -> set[TopicIdPartition] | None:
        """End the session (Kafka's ``releaseSession``): its partitions, whose records acquired by
        the member the caller releases; None when there is none (SHARE_SESSION_NOT_FOUND)."""
        session = self._remove((group_id, member_id))
        return None if session is None else session.partitions

    def connection_closed(self, connection: Hashable) -> list[tuple[SessionKey, set[TopicIdPartition]]]:
        """End every session the connection created: ((group id, member id), partitions) for each,
        in creation order, for the caller to release the members' records."""
        keys = self._by_connection.get(connection, {})
        ended = []
        for key in list(keys):
            session = self._remove(key)
            if session is not None:
                ended.append((key, session.partitions))
        return ended

    # ---- queries ---------------------------------------------------------------------------------

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def sessions_of_group(self, group_id: str) -> list[str]:
        """The member ids of the group's sessions, in creation order."""
        return list(self._by_group.get(group_id, ()))

    def __len__(self) -> int:
        return len(self._sessions)

    def index_sizes(self) -> tuple[int, int, int]:
        """(sessions, connections bound, groups indexed): for the tests of the invariants."""
        return len(self._sessions), len(self._by_connection), len(self._by_group)

    # ---- internals -------------------------------------------------------------------------------

    def _existing(self, key: SessionKey) -> ShareSession:
        session = self._sessions.get(key)
        if session is None:
            raise ShareSessionError(
                ErrorCode.share_session_not_found,
                f"No share session found for group {key[0]} member {key[1]}")
        return session

    @staticmethod
    def _check_epoch(session: ShareSession, epoch: int) -> None:
        if session.epoch != epoch:
            raise ShareSessionError(
                ErrorCode.invalid_share_session_epoch,
                f"Share session of group {session.group_id} member {session.member_id}: "
                f"expected epoch {session.epoch}, but got {epoch} instead")

    def _add(self, session: ShareSession) -> None:
        self._sessions[session.key] = session
        self._by_connection.setdefault(session.connection, {})[session.key] = None
        self._by_group.setdefault(session.group_id, {})[session.member_id] = None

    def _remove(self, key: SessionKey) -> ShareSession | None:
        session = self._sessions.pop(key, None)
        if session is None:
            return None
        bound = self._by_connection[session.connection]
        del bound[key]
        if not bound:
            del self._by_connection[session.connection]
        members = self._by_group[session.group_id]
        del members[session.member_id]
        if not members:
            del self._by_group[session.group_id]
        return session
