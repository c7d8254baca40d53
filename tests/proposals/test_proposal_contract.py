"""What an agent is told about proposals (`memsync contract`)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Cli


def test_the_contract_explains_proposals(cli: Cli, tmp_path: Path) -> None:
    text = cli("contract", cwd=tmp_path).out
    assert "proposals/<memory>/$MEMSYNC_RUN_ID" in text and "MEMSYNC_CONSOLIDATE=1" in text
    assert "Do not try to accept or reject your own proposal" in text
