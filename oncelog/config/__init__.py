"""Every setting's one home.

* :mod:`.registry`: Kafka's topic and broker configs — names, types, Kafka's and oncelog's
  defaults, validators, synonyms, DescribeConfigs/AlterConfigs semantics — and, for each broker
  config ``oncelog serve`` takes, its flag and the :class:`~.settings.BrokerConfig` field it sets.
* :mod:`.settings`: the frozen dataclasses components are constructed with (``BrokerConfig``,
  ``LogConfig``, ``FsyncPolicy``, ``GroupConfig``, ``TxnConfig``); their defaults come from the
  registry.
* :mod:`.serve_options`: ``oncelog serve``'s options, ``--config server.properties`` and
  ``--override name=value``, all generated from the registry, and the ``BrokerConfig`` they build.

Pure: no I/O beyond reading a properties file; nothing here imports the broker's packages.
"""
