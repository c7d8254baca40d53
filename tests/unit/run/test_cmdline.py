"""What of a run's command line is shown and recorded (memsync.cmdline): credentials never are.

Secret-shaped values are assembled at runtime so this file holds nothing a scanner flags.
"""

from __future__ import annotations

import random

import pytest

from memsync.run.cmdline import mask_args, shown_command

_rng = random.Random(11)
PW = "Zq8" + "".join(_rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(14))
TOKEN = "gh" + "p_" + "".join(_rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
                              for _ in range(36))

REDACTED: list[tuple[str, list[str], list[str]]] = [
    ("option value", ["agent", "--token", PW], ["agent", "--token", "<redacted>"]),
    ("option equals", ["agent", f"--token={PW}"], ["agent", "--token=<redacted>"]),
    ("api key", ["agent", "--api-key", PW], ["agent", "--api-key", "<redacted>"]),
    ("password", ["agent", "--password", PW], ["agent", "--password", "<redacted>"]),
    ("client secret", ["agent", f"--client-secret={PW}"], ["agent", "--client-secret=<redacted>"]),
    ("short pass option", ["wget", "--http-password", PW, "u"], ["wget", "--http-password", "<redacted>", "u"]),
    ("mysql -p", ["mysql", "-uroot", f"-p{PW}", "db"], ["mysql", "-uroot", "-p<redacted>", "db"]),
    ("mysql via docker", ["docker", "exec", "db", "mysql", f"-p{PW}"],
     ["docker", "exec", "db", "mysql", "-p<redacted>"]),
    ("sshpass", ["sshpass", "-p", PW, "ssh", "h"], ["sshpass", "-p", "<redacted>", "ssh", "h"]),
    ("curl -u", ["curl", "-u", f"bot:{PW}", "https://x"], ["curl", "-u", "bot:<redacted>", "https://x"]),
    ("curl --user=", ["curl", f"--user=bot:{PW}"], ["curl", "--user=bot:<redacted>"]),
    ("bearer header", ["curl", "-H", f"Authorization: Bearer {PW}"],
     ["curl", "-H", "Authorization: Bearer <redacted>"]),
    ("api key header", ["curl", "-H", f"X-Api-Key: {PW}"], ["curl", "-H", "X-Api-Key: <redacted>"]),
    ("url password", ["git", "clone", f"https://bot:{PW}@git.example.org/r.git"],
     ["git", "clone", "https://bot:<redacted>@git.example.org/r.git"]),
    ("url token user", ["git", "clone", f"https://{PW}@github.com/o/r.git"],
     ["git", "clone", "https://<redacted>@github.com/o/r.git"]),
    ("env assignment", ["env", f"OPENAI_API_KEY={PW}", "DEBUG=1", "agent"],
     ["env", "OPENAI_API_KEY=<redacted>", "DEBUG=1", "agent"]),
    ("known token", ["agent", TOKEN], ["agent", "<redacted>"]),
    ("shell script", ["sh", "-c", f"curl -H 'Authorization: Bearer {PW}' --token {PW} https://u:{PW}@h/ && "
                                  f"TOKEN={PW} ./go && mysql -p{PW} && echo {TOKEN}"],
     ["sh", "-c", "curl -H 'Authorization: Bearer <redacted>' --token <redacted> https://u:<redacted>@h/ && "
                  "TOKEN=<redacted> ./go && mysql -p<redacted> && echo <redacted>"]),
]

KEPT: list[tuple[str, list[str]]] = [
    ("mkdir -p", ["mkdir", "-p", "notes/runs"]),
    ("uid:gid", ["docker", "run", "-u", "1000:1000", "img"]),
    ("password from stdin", ["docker", "login", "--password-stdin", "-u", "me"]),
    ("metadata options", ["agent", "--max-tokens", "4096", "--token-file", "/run/t", "--secret-name", "db"]),
    ("variable reference", ["sh", "-c", "curl --token $TOKEN -u bot:$PW https://x"]),
    ("prose prompt", ["agent", "--prompt", "write notes about the password policy and token limits"]),
    ("plain url", ["curl", "https://example.org/a?b=c"]),
]


@pytest.mark.parametrize(("argv", "shown"), [pytest.param(a, s, id=c) for c, a, s in REDACTED])
def test_credentials_are_redacted(argv: list[str], shown: list[str]) -> None:
    assert mask_args(argv) == shown


@pytest.mark.parametrize("argv", [pytest.param(a, id=c) for c, a in KEPT])
def test_ordinary_arguments_are_kept(argv: list[str]) -> None:
    assert mask_args(argv) == argv


def test_shown_command_is_one_shell_quoted_line() -> None:
    assert shown_command(["sh", "-c", f"echo a\nTOKEN={PW} b"]) == "sh -c 'echo a\\nTOKEN=<redacted> b'"
