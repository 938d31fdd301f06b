"""Operating the gate: probe a route, record what it streams, verify fixtures after an upgrade.

``toolgate probe`` (:mod:`.probe`), ``toolgate record`` (:mod:`.record`) and ``toolgate
verify`` (:mod:`.verify`); :mod:`.requests` holds the probe's fixed set of requests, which
the loopback fake upstream (:mod:`litellm_toolgate.demo.personalities`) answers too.
"""
