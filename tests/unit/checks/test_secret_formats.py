"""checks/secret_formats: each added token format is found by the scanner with its rule, and what
only resembles one (a longer word, a placeholder) is not."""

from __future__ import annotations

import pytest

from memsync.checks import secret_formats
from memsync.checks.secrets import scan_bytes

HEX32 = "9f3b2c71e4a8d05b6c1f7e2a9d4b8c03"
B64 = "Ab3dEf6hIj9lMn2pQr5tUv8xYz1"


@pytest.mark.parametrize(("rule", "text"), [
    ("gitlab-token", "glrt-" + "x1Y2z3W4v5U6t7S8r9Q0"),
    ("mailgun-api-key", "key-" + HEX32),
    ("mailgun-api-key", HEX32 + "-0a1b2c3d-4e5f6a7b"),
    ("databricks-token", "dapi" + HEX32),
    ("docker-token", "dckr_pat_" + "Ab1" * 9),
    ("telegram-bot-token", "123456789:AA" + "Bc1De2Fg3Hi4Jk5Lm6No7Pq8Rs9Tu0VwX"),
    ("age-secret-key", "AGE-SECRET-KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L" + "QPZRY9X8GF2TVDW0S3JN54KHCE"),
    ("twilio-api-key", "SK" + HEX32),
    ("netrc-password", "machine example.com login me password hunter2-long"),
])
def test_each_format_is_found_with_its_rule(rule: str, text: str) -> None:
    assert rule in secret_formats.RULE_IDS or rule == "gitlab-token"
    found = scan_bytes("notes.md", f"a line\nsee {text} here\n".encode())
    assert [(f.rule, f.line) for f in found] == [(rule, 2)]
    assert text not in found[0].preview  # the preview never holds the secret


@pytest.mark.parametrize("text", [
    "xkey-" + HEX32 + "x",  # inside a longer word
    "machine example.com login me password <token>",  # a placeholder
    "machine example.com password $TOKEN",
    "dapi" + HEX32[:20],  # too short
])
def test_lookalikes_are_not_secrets(text: str) -> None:
    assert scan_bytes("notes.md", f"{text}\n".encode()) == []


def test_a_discord_token_is_measured_from_its_head() -> None:
    token = "M" + B64[:23] + "." + "Ab1Cd2" + "." + B64 + "x"
    text = f"bot {token} end"
    at = text.index(".")
    assert secret_formats.lead(secret_formats.DISCORD, text, at) == 24
    assert secret_formats.lead(secret_formats.DISCORD, "no head here .Ab1Cd2.", 13) is None
    assert secret_formats.lead(secret_formats.MAILGUN, text, 5) == 32
