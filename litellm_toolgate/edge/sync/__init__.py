"""Sync calls under ``litellm.callbacks``: the edge's sync machinery in one place.

litellm gives a callback no sync hook that can change a request or stop a response, so sync
calls are armed in ``log_pre_api_call`` and claimed on the wire by a transport of the gate's:

* :mod:`.claims`: the host bookkeeping (calls armed per thread and call id, each claimed
  once by a one-time token; calls another party vouches for). No I/O.
* :mod:`.claiming`: the claiming transport on ``litellm.sync_transport``, arming, the
  after-headers check, vouching, and the installation of the gate's globals (made by the
  first call that needs them, restored when the last gate is closed).
* :mod:`.sdkclaim`: the OpenAI SDK routes, claimed on the SDK client's httpx client.
* :mod:`.tokenclaim`: a route whose litellm handler drops ``client=`` (Cohere's): a
  ``ToolGate`` or async callback call claimed on litellm's own client by a one-time token in
  its ``extra_headers``, sync and async.
* :mod:`.custom`: ``litellm.custom_provider_map`` providers, whose sync turns are refused.
* :mod:`.refusal`: :class:`~.refusal.UngatedCallRefused` (a ``ToolGateError``), the
  answer a refused request gets in place of being sent, how an answer that came back
  through a client the gate never saw is turned into that refusal, and the last resort
  :class:`~.refusal.SyncCallStopped` (a ``BaseException`` no known path reaches).
* :mod:`.hooks`: the callback's sync hooks (call set-up, ``log_pre_api_call``,
  ``log_post_api_call``, ``log_failure_event``): where a sync call is refused, armed and
  checked, and how each refusal reaches the caller.
"""
