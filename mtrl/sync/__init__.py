"""How learner replicas agree when they do not all-reduce every update
(``learner.parallel.sync``): the :class:`~mtrl.sync.replica_sync.ReplicaSync` protocol the
trainer asks, the periodic modes ``local_sgd`` and ``diloco``
(:mod:`~mtrl.sync.loose_sync`, which also makes the mode a config names), gossip ``async``
(:mod:`~mtrl.sync.gossip`), and what replicas combine (:mod:`~mtrl.sync.replica_state`)."""
