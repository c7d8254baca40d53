"""More of the secret scanner's token formats (secret_rules.py holds the rest and the scan).

Rules (added to ``secret_rules.RULE_IDS``)
------------------------------------------
``gitlab-token``
    also runner (``glrt-``), deploy (``gldt-``), pipeline trigger (``glptt-``), feed (``glft-``),
    incoming mail (``glimt-``), OAuth application (``gloas-``), CI job (``glcbt-``) and agent
    (``glagent-``) tokens.
``mailgun-api-key``
    ``key-`` + 32 hex digits, and the current ``<32 hex>-<8 hex>-<8 hex>`` keys.
``databricks-token``
    ``dapi`` + 32 hex digits (and an optional ``-N`` suffix).
``docker-token``
    Docker Hub personal and organisation access tokens, ``dckr_pat_`` / ``dckr_oat_``.
``discord-token``
    a bot token: the base64 of the bot's numeric id (``M``/``N``/``O`` + 23-27 characters), a dot,
    6 characters, a dot, 27-40 characters; upper, lower case and digits required.
``discord-webhook``
    ``discord.com/api/webhooks/<id>/<token>`` (also ``discordapp.com``).
``telegram-bot-token``
    ``<bot id, 8-10 digits>:AA`` + 33 base64url characters.
``age-secret-key``
    ``AGE-SECRET-KEY-1`` + 58 bech32 characters.
``twilio-api-key``
    ``SK`` + 32 lower-case hex digits (an API key's SID, which with its secret signs requests).
``datadog-api-key``
    32 (API) or 40 (application) hex digits right after ``datadog key``, ``datadog api key``,
    ``dd_app_key``... in any case (nothing else tells Datadog's keys from a checksum).
``netrc-password``
    ``machine HOST [login USER] password SECRET`` (also ``default``), the ``.netrc`` syntax git,
    curl and ftp read; placeholders (``password <token>``, ``$TOKEN``, ``***``) and passwords
    shorter than 4 characters are not reported.
"""

from __future__ import annotations

from memsync.util.lazyre import LazyRe

__all__ = ["LABELLED", "NETRC_RE", "RULE_IDS", "TOKEN_RULES", "lead"]

_W = r"A-Za-z0-9_"
_WD = r"A-Za-z0-9_\-"
_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"
_GITLAB = ("glrt-", "gldt-", "glptt-", "glft-", "glimt-", "gloas-", "glcbt-", "glagent-")

RULE_IDS: tuple[str, ...] = (
    "mailgun-api-key", "databricks-token", "docker-token", "discord-token", "discord-webhook",
    "telegram-bot-token", "age-secret-key", "twilio-api-key", "datadog-api-key", "netrc-password",
)

# Literal first, so the regex engine skips through text quickly; what comes before the literal is
# checked by look-behind, and LEAD says how many characters of the secret stand before the match.
MAILGUN = LazyRe(rf"-(?<=[0-9a-f]{{32}}-)(?<![{_WD}][0-9a-f]{{32}}-)(?P<body>[0-9a-f]{{8}}-[0-9a-f]{{8}})"
                 rf"(?![{_WD}])", "-")
# a Discord bot token's first part is 23-27 characters long: found from its middle (DISCORD_HEAD)
DISCORD = LazyRe(rf"\.(?P<body>[{_WD}]{{6}}\.[{_WD}]{{27,40}})(?![{_WD}.])", ".")
DISCORD_HEAD = LazyRe(rf"(?:^|[^{_WD}.])(?P<head>[MNO][{_WD}]{{23,27}})$")
LEAD = {MAILGUN: 32}


def lead(regex: LazyRe[str], text: str, at: int) -> int | None:
    """How many characters of the secret stand before `at`, where `regex` matched; None: no secret."""
    if regex is not DISCORD:
        return LEAD.get(regex, 0)
    head = DISCORD_HEAD.search(text, max(0, at - 28), at)
    return None if head is None else at - head.start("head")

# (rule, regex with a `body` group, required classes: see secret_rules._has_classes). A leading
# look-behind keeps each from starting inside a longer word.
TOKEN_RULES: tuple[tuple[str, LazyRe[str], int], ...] = (
    ("gitlab-token", LazyRe(rf"gl(?<![{_WD}]gl)(?:rt|dt|ptt|ft|imt|oas|cbt|agent)-(?P<body>[{_WD}]{{20,200}})"
                            rf"(?![{_WD}])", *_GITLAB), 2),
    ("mailgun-api-key", LazyRe(rf"key-(?<![{_WD}]key-)(?P<body>[0-9a-f]{{32}})(?![{_WD}])", "key-"), 0),
    ("mailgun-api-key", MAILGUN, 0),
    ("databricks-token", LazyRe(rf"dapi(?<![{_WD}]dapi)(?P<body>[0-9a-f]{{32}}(?:-[0-9])?)(?![{_WD}])", "dapi"), 0),
    ("docker-token", LazyRe(rf"dckr_(?<![{_WD}]dckr_)(?:pat|oat)_(?P<body>[{_WD}]{{24,100}})(?![{_WD}])", "dckr_"), 2),
    ("discord-token", DISCORD, 3),
    ("discord-webhook", LazyRe(r"discord(?:app)?\.com/api/webhooks/(?P<body>[0-9]{17,20}/[A-Za-z0-9_\-]{60,70})"
                               rf"(?![{_WD}])", "/api/webhooks/"), 0),
    ("telegram-bot-token", LazyRe(rf"(?<![0-9])[0-9]{{8,10}}:(?P<body>AA[{_WD}]{{33}})(?![{_WD}])", ":AA"), 2),
    ("age-secret-key", LazyRe(rf"AGE-SECRET-KEY-1(?P<body>[{_BECH32}]{{58}})(?![{_W}])", "AGE-SECRET-KEY-1"), 0),
    ("twilio-api-key", LazyRe(rf"SK(?<![{_WD}]SK)(?P<body>[0-9a-f]{{32}})(?![{_WD}])", "SK"), 0),
    ("datadog-api-key", LazyRe(r"(?:datadog|Datadog|DATADOG|dd|DD)(?<![A-Za-z0-9]dd)(?<![A-Za-z0-9]DD)"
                               r"[ _\-]?(?:api|API|Api|app|APP|App|application|Application|APPLICATION)?[ _\-]?"
                               rf"(?:key|KEY|Key)[\"'`]?[ \t]*[:=]?[ \t]*[\"'`]?(?P<body>[0-9a-f]{{40}}|[0-9a-f]{{32}})"
                               rf"(?![{_WD}])", "datadog", "Datadog", "DATADOG", "dd", "DD"), 0),
)

# Rules whose preview shows the whole text before the body (a URL's host and path, never secret).
LABELLED = frozenset({"discord-webhook"})

NETRC_RE = LazyRe(r"(?<![\w-])(?:machine[ \t]+(?P<host>\S{1,253})|default)"
                  r"(?:\s+(?:login|account|port)\s+\S{1,256})*\s+password\s+(?P<pw>\S{1,256})",
                  "machine", "default")
