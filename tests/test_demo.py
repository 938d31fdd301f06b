"""`toolgate demo` end to end on its embedded default (the loopback fake CometAPI)."""

from __future__ import annotations

import pytest

from litellm_toolgate.cli import main


def test_demo_prints_56_and_quarantines_the_broken_stream(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COMETAPI_KEY", raising=False)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "computed locally: 56" in out
    assert "7 times 8 is 56." in out
    assert "quarantined: attempt" in out and "missing_finish" in out
    assert '"execution_state": "quarantined"' in out
    assert "CANARY-7f3a9c" not in out
