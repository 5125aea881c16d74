"""The classic-protocol group coordinator, laid out as :mod:`oncelog.txn` is:

* :mod:`.state` — GroupState, its transition table and diagram; Group, Member, the Join/Sync
  results and the member checks' errors;
* :mod:`.coordinator` — GroupCoordinator: JoinGroup and SyncGroup (numbered steps), Heartbeat,
  LeaveGroup, DeleteGroups, timers, replay of group records;
* :mod:`.offsets` — committed and transactional offsets (GroupOffsets), retention;
* :mod:`.records` — Kafka's ``__consumer_offsets`` key/value formats;
* :mod:`.store` — the I/O side: the ``__consumer_offsets`` topic and its replay.

Only :mod:`.store` does I/O; the rest is sans-IO and driven by an injected clock and ``persist``.
"""
