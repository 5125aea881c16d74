"""The group coordinator: classic-protocol, consumer (KIP-848) and streams (KIP-1071) groups in one
namespace of group ids, their offsets, and ``__consumer_offsets``; share groups (KIP-932) beside them. Laid out as :mod:`oncelog.txn` is, one idea per
module:

Classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup):

* :mod:`.state` — GroupState and its table keyed by event (``[state][event] -> state``) under
  its diagram; Group (``transition(event)``, ``restore_from``), Member, the Join/Sync results
  and the member checks' errors;
* :mod:`.coordinator` — GroupCoordinator, the front of the package: JoinGroup and SyncGroup
  (numbered steps), Heartbeat, LeaveGroup, timers, replay; hands consumer groups, the migration,
  offsets and commit checks to the modules below.

Consumer protocol (ConsumerGroupHeartbeat, KIP-848):

* :mod:`.consumer_state` — ConsumerGroup, ConsumerMember, their tables (member states keyed by
  event, the derived group state), reconciliation (``next_member_state``, pure), the records of
  a change;
* :mod:`.consumer_coordinator` — ConsumerGroupCoordinator: the heartbeat's steps 1-8, leave and
  fencing, timers, writing with put-back on failure;
* :mod:`.consumer_assignment` — subscriptions, regexes resolved under the member's ACLs, the
  target assignment (steps 5 and 6);
* :mod:`.assignors` — the server-side assignors (``uniform``, ``range``);
* :mod:`.topic_regex` — RE2J's syntax for ``subscribed_topic_regex``;
* :mod:`.consumer_replay` — the groups rebuilt from their records at start-up;
* :mod:`.consumer_records` — Kafka's ``__consumer_offsets`` record types 3-16: their keys and values.

Between the two:

* :mod:`.migration` — classic <-> consumer, both directions (policy table, numbered steps), and
  classic members of a consumer group;
* :mod:`.classic_members` — a classic member's partitions by topic name <-> by topic id (the
  consumer protocol's bytes are :mod:`oncelog.protocol.consumer_protocol`).

Streams groups (KIP-1071: StreamsGroupHeartbeat, StreamsGroupDescribe; docs/streams-groups.md):

* :mod:`.streams_coordinator` — StreamsGroupCoordinator: the heartbeat's steps, leave and
  fencing, timers, the member checks of offset commits, replay;
* :mod:`.streams_group` — StreamsGroup, StreamsMember, their states, reconciliation of active
  tasks (``next_assignment``, pure), the records of a change;
* :mod:`.streams_topology` — the topology as sent, its checks, its configuration against the
  topics (statuses, partition counts, the internal topics to create);
* :mod:`.streams_assignor` — Kafka's StickyTaskAssignor (active tasks);
* :mod:`.streams_records` — Kafka's ``__consumer_offsets`` record types 17 and 19-23.

Share groups (KIP-932: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge; docs/share-groups.md):

* :mod:`.share_coordinator` — ShareCoordinator, the front the handlers use: share partitions made
  on first fetch, the fetch's read and acquire, acknowledgements made durable, releases, timers;
* :mod:`.share_group` — ShareGroups: membership by heartbeat (epochs, sessions, the assignment);
* :mod:`.share_assignor` — Kafka's SimpleAssignor (a partition may go to several members);
* :mod:`.share_sessions` — ShareSessions: the share-session cache (epochs, limit, connections);
* :mod:`.share_partition` — SharePartition: in-flight records, acquire / acknowledge / release /
  expire, the SPSO, the StateChanges to persist;
* :mod:`.share_state` — ``__share_group_state``: its records (a snapshot per change) and replay.

Offsets and storage:

* :mod:`.offsets` — committed and transactional offsets (GroupOffsets), DeleteGroups, retention;
* :mod:`.commit_checks` — who may commit or fetch offsets (generation, member epoch, KIP-447,
  KIP-1251);
* :mod:`.records` — Kafka's ``__consumer_offsets`` key/value formats of offsets and classic groups,
  and the one key codec of every record type;
* :mod:`.store` — the I/O side: the ``__consumer_offsets`` topic and its replay.

Only :mod:`.store`, :mod:`.share_state` and :mod:`.share_coordinator` do I/O; the rest is sans-IO
and driven by an injected clock and ``persist``.
"""
