"""The standalone fake upstream behind ``toolgate fake-upstream`` and the example policy."""

from __future__ import annotations

import json

from litellm_toolgate.core.rules.policy import ToolCall
from litellm_toolgate.demo.serve import demo_answer, workspace_policy
from litellm_toolgate.loopback.upstream import recording


def _user(text: str, stream: bool = True) -> dict[str, object]:
    return {"stream": stream, "messages": [{"role": "user", "content": text}]}


def test_routes_like_the_demo() -> None:
    assert demo_answer(_user("What is 7 times 8?")).body == recording("round1_multiply.sse")
    assert demo_answer(_user("send a broken one")).body == recording("broken_truncated.sse")
    followup = {
        "stream": True,
        "messages": [
            {"role": "user", "content": "7 times 8?"},
            {"role": "tool", "tool_call_id": "c", "content": json.dumps({"value": 56})},
        ],
    }
    assert b"56" in demo_answer(followup).body


def test_a_whole_response_is_one_json_body() -> None:
    answer = demo_answer(_user("What is 7 times 8?", stream=False))
    assert answer.content_type == "application/json"
    message = json.loads(answer.body)["choices"][0]["message"]
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["multiply"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"a": 7, "b": 8}


def test_the_example_policy() -> None:
    def call(name: str, path: str) -> ToolCall:
        return ToolCall("att", 0, "c", name, {"path": path, "content": ""})

    assert workspace_policy(call("write_file", "notes/today.md")).approved
    assert not workspace_policy(call("write_file", "/etc/passwd")).approved
    assert not workspace_policy(call("write_file", "notes/../../x")).approved
    assert workspace_policy(call("multiply", "/etc/x")).approved
