"""Operating the gate: probe a route, record what it streams, verify fixtures after an
upgrade, export metrics and escalate a failing route.

``toolgate probe`` (:mod:`.probe`), ``toolgate record`` (:mod:`.record`) and ``toolgate
verify`` (:mod:`.verify`); the Prometheus exporter (:mod:`.metrics`) and route escalation
(:mod:`.escalation`), started from the gate's settings by :mod:`.instruments`. The probe's
requests and the replaying upstream live in :mod:`litellm_toolgate.loopback`. May import the
loopback, the edge and the core.
"""
