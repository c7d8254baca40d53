"""Tests for memsync.secrets.

Every secret-shaped value is assembled at runtime from a fixed prefix and
seeded pseudo-random characters, so this file contains no literal token that
a secret scanner (including memsync's own, see ``test_sources_are_clean``)
would flag.
"""

from __future__ import annotations

import ast
import base64
import random
import time
from pathlib import Path

import pytest

from memsync.checks.secrets import CHUNK_BYTES, PRAGMA, RULE_IDS, Finding, mask, scan_bytes, scan_file, scan_path
from tests.helpers.figures import Figures, figures

__all__ = ["figures"]

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
_ALNUM = _UPPER + _LOWER + _DIGITS
_B64 = _ALNUM + "+/"
_B32 = _UPPER + "234567"
_HEX = "0123456789abcdef"

_rng = random.Random(20240611)


def rnd(n: int, alphabet: str = _ALNUM) -> str:
    """n seeded pseudo-random characters; for the alphanumeric alphabet the
    result always contains an upper-case letter, a lower-case letter and a digit."""
    chars = [_rng.choice(alphabet) for _ in range(n)]
    if alphabet == _ALNUM and n >= 3:
        chars[0], chars[1], chars[2] = _rng.choice(_LOWER), _rng.choice(_UPPER), _rng.choice(_DIGITS)
    return "".join(chars)


def scan(text: str, path: str = "notes.md") -> list[Finding]:
    return scan_bytes(path, text.encode("utf-8"))


def pem(kind: str, body_lines: int = 4, width: int = 64) -> tuple[str, str]:
    """A fake PEM block and its body."""
    body = "\n".join(rnd(width, _B64) for _ in range(body_lines))
    dashes = "-" * 5
    text = f"{dashes}BEGIN {kind}{dashes}\n{body}\n{dashes}END {kind}{dashes}\n"
    return text, body


_BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


def discord_token() -> str:
    """A bot token's shape: base64 of an 18-19 digit id, 6 characters, 27-38 characters."""
    first = base64.b64encode(rnd(18, "123456789").encode()).decode().rstrip("=")
    return f"{first}.{rnd(6, _ALNUM + '-_')}.{rnd(38)}"


# --------------------------------------------------------------------------
# Positive cases: (rule, text, secret, expected line).

_PK = "PRIVATE " + "KEY"  # keep even the header text out of this file
_rsa_text, _rsa_body = pem("RSA " + _PK)
_ssh_text, _ssh_body = pem("OPENSSH " + _PK, body_lines=6, width=70)
_enc_body = rnd(64, _B64)
_enc_text = (
    f"-----BEGIN RSA {_PK}-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,{rnd(32, _HEX).upper()}\n\n"
    f"{_enc_body}\n-----END RSA {_PK}-----\n"
)
_json_body = rnd(64, _B64)
_json_text = (
    f'{{"type": "service_account", "private_key": "-----BEGIN {_PK}-----\\n{_json_body}'
    f'\\n{rnd(64, _B64)}\\n-----END {_PK}-----\\n"}}\n'
)
_pgp_body = rnd(64, _B64)
_pgp_text = (
    f"-----BEGIN PGP {_PK} BLOCK-----\nVersion: GnuPG v2\n\n{_pgp_body}\n-----END PGP {_PK} BLOCK-----\n"
)

_akia = "AK" + "IA" + rnd(16, _B32)
_asia = "AS" + "IA" + rnd(16, _B32)
_aws_secret = rnd(40, _B64)
_aws_secret_json = rnd(40, _B64)
_ghp = "ghp_" + "a1B2" * 9
_gho = "gho_" + rnd(36)
_ghs = "ghs_" + rnd(36)
_ghr = "ghr_" + rnd(36)
_ghu = "ghu_" + rnd(36)
_github_pat = "github_pat_" + rnd(22) + "_" + rnd(59)
_glpat = "glpat-" + rnd(20)
_slack = "xo" + "xb-" + rnd(12, _DIGITS) + "-" + rnd(13, _DIGITS) + "-" + rnd(24)
_slack_user = "xo" + "xp-" + rnd(11, _DIGITS) + "-" + rnd(12, _DIGITS) + "-" + rnd(32, _HEX)
_google = "AI" + "za" + rnd(35)
_stripe = "sk_" + "live_" + rnd(24)
_stripe_restricted = "rk_" + "live_" + rnd(99)
_openai_proj = "sk-" + "proj-" + rnd(48) + "_" + rnd(40) + "-" + rnd(40)
_openai_legacy = "sk-" + rnd(48)
_anthropic = "sk-" + "ant-" + "api03-" + rnd(93) + "AA"
_hf = "hf_" + rnd(34, _UPPER + _LOWER)
_npm = "npm_" + rnd(36)
_jwt = "ey" + "J" + rnd(30) + "." + "ey" + "J" + rnd(60) + "." + rnd(43)
_url_pw = rnd(16)
_redis_pw = rnd(24)
_gen_api = rnd(32)
_gen_secret = rnd(40, _B64)
_gen_hex = rnd(40, _HEX)
_gen_pw = rnd(14) + "!#%" + rnd(8)
_gen_env = rnd(48)
_gen_camel = rnd(30)
_gen_dash = rnd(28)
_gen_typed = rnd(32)
_gen_md = rnd(24)
_gen_b64url = rnd(20) + "-" + rnd(12) + "_" + rnd(9)
_UD = _UPPER + _DIGITS
_xapp = "xa" + "pp-1-A" + rnd(10, _UD) + "-" + rnd(13, _DIGITS) + "-" + rnd(64, _HEX)
_webhook = "https://hooks.slack.com/services/" + "T" + rnd(8, _UD) + "/B" + rnd(10, _UD) + "/" + rnd(24)
_sendgrid = "S" + "G." + rnd(22, _ALNUM + "-_") + "." + rnd(43, _ALNUM + "-_")
_azure_key = rnd(86, _B64) + "=="
_gocspx = "GOC" + "SPX-" + rnd(28)
_dop = "do" + "p_v1_" + rnd(64, _HEX)
_basic_pw = rnd(18)
_basic = base64.b64encode(f"deploy:{_basic_pw}".encode()).decode()
_k8s_b64 = base64.b64encode(_ghs.encode()).decode()
_short_pw = "Tr0ub" + "4dor&3x"
_pypi = "pypi-" + "AgEIcHlwaS5vcmc" + rnd(120, _ALNUM + "-_")
_shopify = "shp" + "at_" + rnd(32, _HEX)

_mailgun = "ke" + "y-" + rnd(32, _HEX)
_dapi = "da" + "pi" + rnd(32, _HEX)
_dckr = "dckr" + "_pat_" + rnd(27, _ALNUM + "-_")
_discord = discord_token()
_discord_hook = "https://discord.com/api/" + "webhooks/" + rnd(19, _DIGITS) + "/" + rnd(68, _ALNUM + "-_")
_telegram = rnd(10, _DIGITS) + ":A" + "A" + rnd(33)
_age = "AGE-SECRET-" + "KEY-1" + rnd(58, _BECH32)
_twilio = "S" + "K" + rnd(32, _HEX)
_datadog = rnd(32, _HEX)
_netrc_pw = rnd(20)

POSITIVE: list[tuple[str, str, str, str, int]] = [
    # (id, rule, text, secret, line)
    ("pem-rsa", "private-key", "# keys\n\n" + _rsa_text, _rsa_body, 3),
    ("pem-openssh", "private-key", _ssh_text, _ssh_body, 1),
    ("pem-encrypted", "private-key", _enc_text, _enc_body, 1),
    ("pem-json-escaped", "private-key", _json_text, _json_body, 1),
    ("pem-pgp", "private-key", _pgp_text, _pgp_body, 1),
    ("aws-akia", "aws-access-key", f"aws_access_key_id = {_akia}\n", _akia, 1),
    ("aws-asia-prose", "aws-access-key", f"the session used {_asia}, expires soon\n", _asia, 1),
    (
        "aws-secret-ini",
        "aws-secret-key",
        f"[default]\naws_secret_access_key = {_aws_secret}\n",
        _aws_secret,
        2,
    ),
    (
        "aws-secret-json",
        "aws-secret-key",
        f'  "SecretAccessKey": "{_aws_secret_json}",\n',
        _aws_secret_json,
        1,
    ),
    ("github-ghp", "github-token", f"gh token: {_ghp}\n", _ghp, 1),
    ("github-gho", "github-token", f"- oauth `{_gho}`\n", _gho, 1),
    ("github-ghs", "github-token", f"GITHUB_TOKEN={_ghs}\n", _ghs, 1),
    ("github-ghr", "github-token", f"refresh={_ghr}", _ghr, 1),
    ("github-ghu", "github-token", f"| user | {_ghu} |\n", _ghu, 1),
    ("github-pat", "github-token", f"fine-grained: {_github_pat}\n", _github_pat, 1),
    ("gitlab", "gitlab-token", f"export GITLAB_TOKEN='{_glpat}'\n", _glpat, 1),
    ("slack-bot", "slack-token", f"slack bot {_slack}\n", _slack, 1),
    ("slack-user", "slack-token", f"SLACK={_slack_user}\n", _slack_user, 1),
    ("google", "google-api-key", f"maps key {_google}.\n", _google, 1),
    ("stripe-sk", "stripe-live-key", f"stripe: {_stripe}\n", _stripe, 1),
    ("stripe-rk", "stripe-live-key", f"restricted ({_stripe_restricted})\n", _stripe_restricted, 1),
    ("openai-proj", "openai-api-key", f"OPENAI_API_KEY={_openai_proj}\n", _openai_proj, 1),
    ("openai-legacy", "openai-api-key", f'client = OpenAI(api_key="{_openai_legacy}")\n', _openai_legacy, 1),
    ("anthropic", "anthropic-api-key", f"ANTHROPIC_API_KEY: {_anthropic}\n", _anthropic, 1),
    ("huggingface", "huggingface-token", f"huggingface-cli login --token {_hf}\n", _hf, 1),
    ("npm", "npm-token", f"//registry.npmjs.org/:_authToken={_npm}\n", _npm, 1),
    ("jwt", "jwt", f"Authorization: Bearer {_jwt}\n", _jwt, 1),
    (
        "url-postgres",
        "url-password",
        f"DATABASE_URL=postgres://app_user:{_url_pw}@db.internal:5432/app\n",
        _url_pw,
        1,
    ),
    ("url-redis-no-user", "url-password", f"cache at redis://:{_redis_pw}@cache:6379/0\n", _redis_pw, 1),
    ("generic-api-key", "high-entropy-assignment", f'api_key = "{_gen_api}"\n', _gen_api, 1),
    ("generic-secret-yaml", "high-entropy-assignment", f"  client_secret: {_gen_secret}\n", _gen_secret, 1),
    ("generic-hex-token", "high-entropy-assignment", f"token: {_gen_hex}\n", _gen_hex, 1),
    ("generic-password", "high-entropy-assignment", f"db_password='{_gen_pw}'\n", _gen_pw, 1),
    ("generic-env", "high-entropy-assignment", f"export MY_SERVICE_API_KEY={_gen_env}\n", _gen_env, 1),
    ("generic-camel-json", "high-entropy-assignment", f'{{"clientSecret": "{_gen_camel}"}}\n', _gen_camel, 1),
    ("generic-kebab-key", "high-entropy-assignment", f"x-api-key: {_gen_dash}\n", _gen_dash, 1),
    ("generic-annotated", "high-entropy-assignment", f'ACCESS_TOKEN: str = "{_gen_typed}"\n', _gen_typed, 1),
    ("generic-markdown", "high-entropy-assignment", f"**Password**: {_gen_md}\n", _gen_md, 1),
    ("generic-passwd-go", "high-entropy-assignment", f"passwd := `{_gen_b64url}`\n", _gen_b64url, 1),
    ("slack-app", "slack-token", f"SLACK_APP_TOKEN={_xapp}\n", _xapp, 1),
    ("slack-webhook", "slack-webhook", f"post alerts to {_webhook}\n", _webhook[33:], 1),
    ("sendgrid", "sendgrid-api-key", f"mail via {_sendgrid}\n", _sendgrid, 1),
    (
        "azure-connection-string",
        "azure-storage-key",
        f"DefaultEndpointsProtocol=https;AccountName=notes;AccountKey={_azure_key};EndpointSuffix=core.windows.net\n",
        _azure_key,
        1,
    ),
    ("google-oauth", "google-oauth-secret", f'"client_secret": "{_gocspx}"\n', _gocspx, 1),
    ("digitalocean", "digitalocean-token", f"doctl auth init -t {_dop}\n", _dop, 1),
    ("basic-auth", "basic-auth", f"Authorization: Basic {_basic}\n", _basic, 1),
    ("base64-k8s", "base64-secret", f"kind: Secret\ndata:\n  token: {_k8s_b64}\n", _k8s_b64, 3),
    ("pypi", "pypi-token", f"TWINE_PASSWORD={_pypi}\n", _pypi, 1),
    ("shopify", "shopify-token", f"shopify: {_shopify}\n", _shopify, 1),
    ("password-short", "high-entropy-assignment", f"password = {_short_pw}\n", _short_pw, 1),
    ("password-prose", "high-entropy-assignment", f"the db password is {_short_pw} for now\n", _short_pw, 1),
    ("mailgun", "mailgun-api-key", f"MAILGUN: {_mailgun}\n", _mailgun, 1),
    ("databricks", "databricks-token", f"host + {_dapi}\n", _dapi, 1),
    ("docker", "docker-token", f"docker login -p {_dckr}\n", _dckr, 1),
    ("discord", "discord-token", f"bot: {_discord}\n", _discord, 1),
    ("discord-webhook", "discord-webhook", f"alerts {_discord_hook}\n", _discord_hook[33:], 1),
    ("telegram", "telegram-bot-token", f"bot {_telegram}\n", _telegram, 1),
    ("age", "age-secret-key", f"# created: today\n{_age}\n", _age, 2),
    ("twilio", "twilio-api-key", f"sid {_twilio}\n", _twilio, 1),
    ("datadog", "datadog-api-key", f"datadog api key: {_datadog}\n", _datadog, 1),
    ("netrc", "netrc-password", f"machine git.example.org\n  login bot\n  password {_netrc_pw}\n", _netrc_pw, 3),
]

_POSITIVE_PARAMS = [
    pytest.param(rule, text, secret, line, id=case_id) for case_id, rule, text, secret, line in POSITIVE
]


@pytest.mark.parametrize(("rule", "text", "secret", "line"), _POSITIVE_PARAMS)
def test_positive(rule: str, text: str, secret: str, line: int) -> None:
    findings = scan(text)
    assert [(f.rule, f.line) for f in findings] == [(rule, line)]
    assert findings[0].path == "notes.md"


def test_every_rule_has_a_positive_case() -> None:
    covered = {rule for _, rule, _, _, _ in POSITIVE}
    assert covered == set(RULE_IDS)
    assert len(RULE_IDS) == len(set(RULE_IDS))


def _leaked(secret: str, shown: str) -> bool:
    """True if ``shown`` contains more than the first 4 characters of ``secret``
    (any 5-character substring of it)."""
    return any(secret[i : i + 5] in shown for i in range(len(secret) - 4))


@pytest.mark.parametrize(("rule", "text", "secret", "line"), _POSITIVE_PARAMS)
def test_preview_and_repr_do_not_leak(rule: str, text: str, secret: str, line: int) -> None:
    (finding,) = scan(text)
    assert finding.preview
    assert not _leaked(secret, finding.preview)
    for shown in (str(finding), repr(finding)):
        assert secret not in shown
        # Beyond its (public) first 4 characters no 5-character run of the
        # secret may appear; "githu" of "github_pat_" is in the rule name.
        assert not _leaked(secret[4:], shown)


def test_preview_format() -> None:
    (finding,) = scan(f"token {_ghp}\n")
    assert finding.preview == "ghp_…(40 chars)"
    (finding,) = scan(f'api_key = "{_gen_api}"\n')
    assert finding.preview == "api_key=…(32 chars)"
    (finding,) = scan(f"DATABASE_URL=postgres://app_user:{_url_pw}@db.internal:5432/app\n")
    assert finding.preview == "postgres://…:…(16 chars)@db.internal:5432"
    assert "app_user" not in finding.preview  # the user part may itself be a token


def test_url_preview_hides_host_when_password_contains_at_sign() -> None:
    first, second = rnd(10), rnd(12)
    (finding,) = scan(f"https://bob:{first}@{second}@example.com/\n")
    assert finding.rule == "url-password"
    assert not _leaked(first, finding.preview)
    assert not _leaked(second, finding.preview)


# --------------------------------------------------------------------------
# Negative cases: things agents' notes are full of.

_sha1 = rnd(40, _HEX)
_sha256 = rnd(64, _HEX)
_uuid = "-".join(rnd(n, _HEX) for n in (8, 4, 4, 4, 12))
_PK_HEADER = "-----BEGIN RSA " + _PK + "-----"
# The secret key used throughout the AWS documentation; it contains EXAMPLE.
_AWS_DOCS_SECRET = "/".join(["wJalrXUtnFEMI", "K7MDENG", "bPxRfiCYEXAMPLEKEY"])

NEGATIVE: list[tuple[str, str]] = [
    ("git-sha", f"- merged in commit {_sha1} (main)\n"),
    ("git-sha-short", f"HEAD is now at {_sha1[:7]} fix tokenizer\n"),
    ("sha256-digest", f"sha256: {_sha256}\n"),
    ("sha256-prefixed", f"image: python@sha256:{_sha256}\n"),
    ("checksum-table", f"| file | sha256 |\n|---|---|\n| notes.md | `{_sha256}` |\n"),
    ("uuid", f"request id {_uuid} failed\n"),
    ("uuid-token-id", f"session_token_id: {_uuid}\n"),
    ("base64-words", "echo aGVsbG8gd29ybGQgdGhpcyBpcyBhIHRlc3Q= | base64 -d\n"),
    ("url-plain", "See https://docs.python.org/3/library/re.html#re.Pattern.finditer for details.\n"),
    ("url-port-and-at", "http://localhost:8080/api/users?email=me@example.com\n"),
    ("url-ssh-git", "git clone git@github.com:org/repo.git && ssh://git@host:22/repo.git\n"),
    ("url-ipv6", "server listens on http://[::1]:8080/health\n"),
    ("url-password-stars", "DATABASE_URL=postgres://app:***@db:5432/app\n"),
    ("url-password-angle", "https://user:<token>@git.example.com/org/repo.git\n"),
    ("url-password-var", "redis://:$REDIS_PASSWORD@cache:6379 and amqp://guest:${RABBIT_PASS}@mq/\n"),
    ("url-password-template", "mongodb://admin:{{ mongo_password }}@mongo:27017\n"),
    ("url-password-word", "postgres://user:password@localhost/db\n"),
    ("url-password-short-example", "new URL('https://abc:xyz@example.com') and https://a:b@host/\n"),
    ("url-password-same-as-user", "amqp://guest:guest@localhost:5672/\n"),
    ("markdown-table", "| model | max_tokens | tokens/s |\n|---|---|---|\n| gpt-4o | 4096 | 85 |\n"),
    (
        "identifiers",
        "token = get_token_from_vault(secret_name)\nself.api_key = settings.openai_api_key_value\n",
    ),
    ("env-lookup", 'client = OpenAI(api_key=os.environ["OPENAI_API_KEY"])\n'),
    ("password-hash-code", "password_hash = hash_password(raw_password, rounds=12)\n"),
    ("camel-identifier", "apiKey: getApiKeyFromEnvironmentVariable\n"),
    ("type-annotation", 'def sign(private_key: "_EllipticCurvePrivateKey", data: bytes) -> bytes:\n'),
    ("prose-token", "The token: a short-lived credential; each token expires after one hour.\n"),
    ("prose-secret", "Secret: nobody documented the tokenizer, so the token budget was wrong.\n"),
    ("token-counts", "max_tokens: 4096\ntoken_count: 123456789012345678901234\ntotal_tokens=98234\n"),
    ("token-metadata", f"token_url: https://auth.example.com/oauth/token\nsecret_sha256: {_sha256}\n"),
    ("github-placeholder", "GITHUB_TOKEN=ghp_" + "X" * 36 + "\n"),
    ("github-placeholder-dots", "token: ghp_XXXXXXXX...\n"),
    ("aws-docs-example", "aws_access_key_id = AK" + "IAIOSFODNN7EXAMPLE\n"),
    ("aws-docs-secret", f"aws_secret_access_key = {_AWS_DOCS_SECRET}\n"),
    ("password-placeholder", "password: <your password>\n"),
    ("api-key-placeholder", 'api_key: "your-api-key-goes-here-1234"\nOPENAI_API_KEY=sk-...\n'),
    ("env-var-reference", "OPENAI_API_KEY=${OPENAI_API_KEY}\nGITHUB_TOKEN=$(gh auth token)\n"),
    ("secret-path", "secret: /var/run/secrets/kubernetes.io/serviceaccount/token\n"),
    ("label-value", "token: GITHUB_TOKEN_FROM_KEYCHAIN_2\npassword: prod-db-password-2024-rotated\n"),
    ("low-entropy-password", "password: Password123Password123\nsecret = 'abababababababababababab'\n"),
    ("words-password", "password: correcthorsebatterystaple\n"),
    ("pem-header-in-prose", f"The file starts with `{_PK_HEADER}` and must never be committed.\n"),
    ("pem-placeholder-body", f"{_PK_HEADER}\n...\n-----END RSA {_PK}-----\n"),
    ("sk-learn-words", "use sk-learn-compatible-estimator-wrapper-version-two here\n"),
    ("stripe-test-key", "stripe: sk_" + "test_" + rnd(24) + "\n"),
    ("tokenizer-key", "tokenizer: sentencepiece_bpe_model_v2_large\n"),
    ("jwt-prefix-only", "JWT headers start with eyJ, e.g. eyJhbGciOiJIUzI1NiJ9 decoded is JSON\n"),
    ("comparison", 'if token == "abcdefghijklmnopqrstu123":\n'),
    ("dotted-version", "secret_manager: google.cloud.secretmanager_v1.SecretManagerServiceClient\n"),
]


@pytest.mark.parametrize("text", [pytest.param(text, id=case_id) for case_id, text in NEGATIVE])
def test_negative(text: str) -> None:
    assert scan(text) == []


def test_negative_cases_combined_in_one_file() -> None:
    assert scan("\n".join(text for _, text in NEGATIVE)) == []


# --------------------------------------------------------------------------
# Pragma, binary, size limit, decoding.


def test_pragma_skips_only_its_line() -> None:
    text = f"token: {_ghp}  <!-- {PRAGMA} -->\ntoken: {_gho}\n"
    assert [(f.rule, f.line) for f in scan(text)] == [("github-token", 2)]
    assert PRAGMA == "memsync:allow-secret"


def test_pragma_on_private_key_header() -> None:
    text = _rsa_text.replace("-----\n", f"----- # {PRAGMA}\n", 1)
    assert scan(text) == []


def test_binary_data_is_scanned_as_bytes() -> None:
    data = b"\x89PNG\r\n\x1a\n\x00\x00" + f"token={_ghp}".encode()
    assert [(f.rule, f.line) for f in scan_bytes("img.png", data)] == [("github-token", 3)]


def test_nul_after_sniff_window_is_scanned() -> None:
    data = b"x" * 9000 + b"\x00\n" + f"token={_ghp}\n".encode()
    assert [f.line for f in scan_bytes("log.txt", data)] == [2]


def test_files_of_any_size_are_scanned_in_chunks() -> None:
    secret_line = f"token={_ghp}\n".encode()
    filler = b"a" * 79 + b"\n"
    data = filler * (6 * CHUNK_BYTES // 80) + secret_line  # 6 MiB: above the old 5 MiB limit
    assert [(f.rule, f.line) for f in scan_bytes("big.md", data)] == [("github-token", 6 * CHUNK_BYTES // 80 + 1)]


def test_invalid_utf8_is_replaced() -> None:
    data = b"caf\xe9 \xff\xfe notes\n" + f"key {_google}\n".encode()
    assert [(f.rule, f.line) for f in scan_bytes("notes.md", data)] == [("google-api-key", 2)]


def test_empty_input() -> None:
    assert scan_bytes("empty.md", b"") == []


# --------------------------------------------------------------------------
# Line numbers, ordering, overlaps.


def test_line_numbers_and_order() -> None:
    lines = [
        "# Notes",
        "",
        f"github: {_ghp}",
        "nothing here",
        f"two on one line: {_npm} and {_google}",
        "",
        f"db = postgres://u:{_url_pw}@host/db",
    ]
    findings = scan("\n".join(lines), path="mem/notes.md")
    assert [(f.line, f.rule) for f in findings] == [
        (3, "github-token"),
        (5, "npm-token"),
        (5, "google-api-key"),
        (7, "url-password"),
    ]
    assert {f.path for f in findings} == {"mem/notes.md"}


def test_crlf_line_numbers() -> None:
    text = f"a\r\nb\r\ntoken: {_gho}\r\n"
    assert [(f.rule, f.line) for f in scan(text)] == [("github-token", 3)]


def test_line_after_non_ascii_and_private_key() -> None:
    text = "İstanbul ünïcödé ✓\n" + _rsa_text + f"after: {_ghs}\n"
    assert [(f.rule, f.line) for f in scan(text)] == [("private-key", 2), ("github-token", 8)]


def test_one_finding_per_private_key_block() -> None:
    block, _ = pem("EC " + _PK, body_lines=30)
    other, _ = pem(_PK, body_lines=10)
    findings = scan(block + "\nsome text\n" + other)
    assert [(f.rule, f.line) for f in findings] == [("private-key", 1), ("private-key", 35)]
    assert findings[0].preview.startswith("-----BEGIN EC ")


def test_tokens_inside_a_key_block_are_not_reported_separately() -> None:
    body = "\n".join([rnd(64, _B64), f"{_akia}{rnd(44, _B64)}", rnd(64, _B64)])
    text = f"-----BEGIN {_PK}-----\n{body}\n-----END {_PK}-----\n"
    assert [f.rule for f in scan(text)] == ["private-key"]


def test_specific_rule_wins_over_generic_assignment() -> None:
    text = f"GITHUB_TOKEN={_ghp}\napi_key = '{_openai_proj}'\n"
    assert [(f.rule, f.line) for f in scan(text)] == [("github-token", 1), ("openai-api-key", 2)]


def test_token_in_url_is_reported_once_per_secret() -> None:
    text = f"git remote add origin https://oauth2:{_glpat}@gitlab.example.com/org/repo.git\n"
    assert [f.rule for f in scan(text)] == ["gitlab-token"]


def test_anthropic_is_not_also_openai() -> None:
    assert [f.rule for f in scan(_anthropic)] == ["anthropic-api-key"]


def test_finding_is_frozen_and_comparable() -> None:
    finding = Finding("a.md", 1, "jwt", "eyJh…(10 chars)")
    with pytest.raises(AttributeError):
        finding.line = 2  # type: ignore[misc]
    assert finding == Finding("a.md", 1, "jwt", "eyJh…(10 chars)")


def test_all_findings_use_known_rule_ids() -> None:
    text = "\n".join(text for _, _, text, _, _ in POSITIVE)
    findings = scan(text)
    assert {f.rule for f in findings} == set(RULE_IDS)
    assert len(findings) == len(POSITIVE)


# --------------------------------------------------------------------------
# Performance and hygiene.


def _markdown_megabyte() -> bytes:
    rng = random.Random(7)
    paragraphs = [
        "## Session {n}\n\nThe agent reviewed the tokenizer; token usage dropped by {n}%.\n",
        "- commit {sha1} on main, sha256: {sha256}\n",
        "- request {uuid} see https://github.com/org/repo/pull/{n} and http://localhost:8080/x\n",
        "| model | max_tokens | cost |\n|---|---|---|\n| gpt-4o | {n} | $0.01 |\n",
        "Never paste the API key or secret here; use `password: <your password>`.\n",
        '```python\nclient = OpenAI(api_key=os.environ["OPENAI_API_KEY"])\ntoken = get_token(name)\n```\n',
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n",
    ]
    out: list[str] = []
    size = 0
    while size < 1_000_000:
        para = rng.choice(paragraphs).format(
            n=rng.randrange(1000),
            sha1="".join(rng.choice(_HEX) for _ in range(40)),
            sha256="".join(rng.choice(_HEX) for _ in range(64)),
            uuid="-".join("".join(rng.choice(_HEX) for _ in range(k)) for k in (8, 4, 4, 4, 12)),
        )
        out.append(para)
        size += len(para)
    return "".join(out).encode()[:1_000_000]


@pytest.mark.slow
def test_one_megabyte_of_markdown_is_fast() -> None:
    data = _markdown_megabyte()
    assert scan_bytes("notes.md", data) == []
    best = min(_timed(data) for _ in range(3))
    # Typically ~10-30 ms; the bound is loose so loaded CI machines do not flake.
    assert best < 0.5


def _timed(data: bytes) -> float:
    start = time.perf_counter()
    scan_bytes("notes.md", data)
    return time.perf_counter() - start


def test_module_imports_only_small_standard_modules() -> None:
    import memsync.checks.secret_formats as formats
    import memsync.checks.secret_rules as rules
    import memsync.checks.secrets as mod
    import memsync.util.lazyre as lazyre

    imported: set[str] = set()
    for module in (mod, rules, lazyre, formats):
        assert module.__file__ is not None
        for node in ast.walk(ast.parse(Path(module.__file__).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                assert node.module is not None
                imported.add(node.module)
    assert imported <= {"re", "sys", "math", "memsync.util.records", "binascii", "typing", "collections.abc",
                        "memsync.checks.secret_rules", "memsync.util.lazyre", "__future__",
                        "memsync.checks", "memsync.checks.secret_formats"}


def test_sources_are_clean() -> None:
    """Neither this test file nor the scanner itself contains a flaggable literal."""
    import memsync.checks.secret_rules as rules
    import memsync.checks.secrets as mod

    assert mod.__file__ is not None and rules.__file__ is not None
    for path in (Path(__file__), Path(mod.__file__), Path(rules.__file__)):
        assert scan_bytes(str(path), path.read_bytes()) == []


# --------------------------------------------------------------------------
# Encodings, chunks, paths, redaction.

_ENCODINGS = ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "utf-8-sig"]


@pytest.mark.parametrize("encoding", _ENCODINGS)
def test_utf16_and_utf32_text_is_decoded(encoding: str) -> None:
    text = f"# Notes\n\nünïcödé ✓ line\ntoken: {_gho}\n"
    assert [(f.rule, f.line) for f in scan_bytes("notes.md", text.encode(encoding))] == [("github-token", 4)]


def test_utf16_inside_binary_data_is_found() -> None:
    data = bytes(range(256)) * 4 + b"\n" + f"key={_ghs}".encode("utf-16-le") + b"\x00\x07" * 32
    assert [(f.rule, f.line) for f in scan_bytes("app.db", data)] == [("github-token", 6)]  # 4 "\n" in range()


@pytest.mark.parametrize("offset", [-60, -30, -1, 0, 1, 30, CHUNK_BYTES - 100])
@pytest.mark.slow
def test_a_token_across_a_chunk_boundary_is_found_once(offset: int) -> None:
    line = f"token: {_gho}\n".encode()
    start = CHUNK_BYTES + offset
    filler = b"." * 99 + b"\n"
    head = (filler * (start // 100 + 1))[:start]
    data = head + line + b"after\n" * 100
    findings = scan_bytes("big.md", data)
    assert [(f.rule, f.line) for f in findings] == [("github-token", head.count(b"\n") + 1)]


def test_many_chunks_every_token_once_with_its_line() -> None:
    lines = [f"line {i} " + "lorem ipsum " * 5 for i in range(60_000)]  # about 4 MiB
    planted = {7: _ghp, 20_000: _gho, 40_001: _glpat, 59_999: _npm}
    for i, token in planted.items():
        lines[i] = f"token {token}"
    findings = scan_bytes("big.md", "\n".join(lines).encode())
    assert [f.line for f in findings] == [i + 1 for i in planted]


@pytest.mark.slow
def test_scan_file_reads_a_chunk_at_a_time(tmp_path: Path) -> None:
    import tracemalloc

    path = tmp_path / "big.log"
    block = ("lorem ipsum dolor sit amet 0123456789 " * 26 + "\n").encode()
    with path.open("wb") as fh:
        for _ in range(16 * 1024 * 1024 // len(block)):
            fh.write(block)
        fh.write(f"token {_ghp}\n".encode())
    tracemalloc.start()
    with path.open("rb") as fh:
        findings = scan_file("big.log", fh)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert [f.rule for f in findings] == ["github-token"]
    assert peak < 8 * CHUNK_BYTES  # a 16 MiB file, a few chunks of memory at most


def test_a_token_in_a_path_is_found_and_redacted() -> None:
    (finding,) = scan_path(f"notes/{_ghp}/todo.md")
    assert (finding.path, finding.line, finding.rule) == ("notes/<redacted>/todo.md", 0, "github-token")
    assert scan_path("notes/2024-06-11/sha-" + _sha1 + ".md") == []


def test_redact_replaces_only_the_secrets() -> None:
    text = f"use {_ghp} and postgres://app:{_url_pw}@db/app then api_key={_gen_api} done"
    assert mask(text) == "use <redacted> and postgres://app:<redacted>@db/app then api_key=<redacted> done"
    assert mask("nothing to hide here") == "nothing to hide here"


def test_short_passwords_need_three_character_classes_and_no_weak_word() -> None:
    assert [f.rule for f in scan(f"DB_PASSWORD={_short_pw}\n")] == ["high-entropy-assignment"]
    for text in ('password = "changeme"\n', "password: Passw0rd!Passw0rd\n", "password: hunter2!\n",
                 "the password is stored in vault\n", "password: ${DB_PASSWORD}\n", "passwd: files systemd\n",
                 'password = request.form["password"]\n', "password=self._password\n",
                 "password: str = Field(default=None)\n", "password: see 1Password\n",
                 "password: P@ssw0rd123\n", "the password was rotated yesterday\n", "password: lowercaseonly1\n"):
        assert scan(text) == [], text


# --------------------------------------------------------------------------
# Corpus of real formats (fake values of the right shape) and of near-misses.

_BASE62 = _DIGITS + _UPPER + _LOWER


def _with_crc(prefix: str, n: int = 30) -> str:
    """A token in GitHub's / npm's documented shape: n random base62 characters and the CRC32
    of them in 6 base62 digits."""
    import zlib

    body = rnd(n)
    crc = zlib.crc32(body.encode())
    digits = ""
    while crc:
        crc, r = divmod(crc, 62)
        digits = _BASE62[r] + digits
    return prefix + body + digits.rjust(6, "0")


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


FORMATS: list[tuple[str, str]] = [
    ("aws access key", f"[default]\naws_access_key_id = {'AK' + 'IA' + rnd(16, _B32)}\n"),
    ("aws secret key", f"aws_secret_access_key = {rnd(40, _B64)}\n"),
    ("github classic (crc)", f"export GH_TOKEN={_with_crc('gh' + 'p_')}\n"),
    ("github oauth (crc)", f"oauth: {_with_crc('gh' + 'o_')}\n"),
    ("github app (crc)", f"installation token {_with_crc('gh' + 's_')}\n"),
    ("github fine-grained", f"{'github' + '_pat_'}{rnd(22)}_{rnd(59)}\n"),
    ("gitlab", f"GITLAB_TOKEN={'gl' + 'pat-'}{rnd(20)}\n"),
    ("slack bot", f"{'xo' + 'xb-'}{rnd(11, _DIGITS)}-{rnd(13, _DIGITS)}-{rnd(24)}\n"),
    ("slack user", f"{'xo' + 'xp-'}{rnd(11, _DIGITS)}-{rnd(12, _DIGITS)}-{rnd(12, _DIGITS)}-{rnd(32, _HEX)}\n"),
    ("slack app", f"SLACK_APP_TOKEN={'xa' + 'pp-1-A'}{rnd(10, _UD)}-{rnd(13, _DIGITS)}-{rnd(64, _HEX)}\n"),
    ("slack webhook", f"https://hooks.slack.com/services/T{rnd(8, _UD)}/B{rnd(10, _UD)}/{rnd(24)}\n"),
    ("google api key", f"key={'AI' + 'za'}{rnd(35, _ALNUM + '-_')}\n"),
    ("google oauth secret", f'{{"client_secret":"{"GOC" + "SPX-"}{rnd(28, _ALNUM + "-_")}"}}\n'),
    ("stripe secret", f"{'sk_' + 'live_'}{rnd(99)}\n"),
    ("stripe restricted", f"{'rk_' + 'live_'}{rnd(99)}\n"),
    ("openai project", f"OPENAI_API_KEY={'sk-' + 'proj-'}{rnd(156, _ALNUM + '-_')}\n"),
    ("anthropic", f"{'sk-' + 'ant-api03-'}{rnd(93, _ALNUM + '-_')}AA\n"),
    ("huggingface", f"HF_TOKEN={'h' + 'f_'}{rnd(34, _UPPER + _LOWER)}\n"),
    ("npm (crc)", f"//registry.npmjs.org/:_authToken={_with_crc('np' + 'm_')}\n"),
    ("pypi", f"password = {'pypi-' + 'AgEIcHlwaS5vcmc'}{rnd(160, _ALNUM + '-_')}\n"),
    ("shopify", f"{'shp' + 'at_'}{rnd(32, _HEX)}\n"),
    ("sendgrid", f"{'S' + 'G.'}{rnd(22, _ALNUM + '-_')}.{rnd(43, _ALNUM + '-_')}\n"),
    ("azure storage", f"DefaultEndpointsProtocol=https;AccountName=n;AccountKey={rnd(86, _B64)}==;\n"),
    ("azure service bus", f"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
                          f"SharedAccessKey={rnd(43, _B64)}=\n"),
    ("digitalocean pat", f"{'do' + 'p_v1_'}{rnd(64, _HEX)}\n"),
    ("digitalocean oauth", f"{'do' + 'o_v1_'}{rnd(64, _HEX)}\n"),
    ("digitalocean refresh", f"{'do' + 'r_v1_'}{rnd(64, _HEX)}\n"),
    ("jwt", f"Authorization: Bearer {'ey' + 'J'}{rnd(30)}.{'ey' + 'J'}{rnd(80)}.{rnd(43, _ALNUM + '-_')}\n"),
    ("rsa private key", pem("RSA " + _PK)[0]),
    ("openssh private key", pem("OPENSSH " + _PK, body_lines=6, width=70)[0]),
    ("url password", f"DATABASE_URL=postgresql://app:{rnd(20)}@db.internal:5432/app\n"),
    ("basic auth header", f"Authorization: Basic {_b64('ci-bot:' + rnd(20))}\n"),
    ("k8s secret (base64 token)", f"apiVersion: v1\nkind: Secret\ndata:\n  token: {_b64(_with_crc('gh' + 'p_'))}\n"),
    ("base64 aws key in yaml", f"creds: {_b64('AK' + 'IA' + rnd(16, _B32))}\n"),
    ("generic api key", f'STRIPE_WEBHOOK_SIGNING_KEY = "{rnd(32)}"\napi_key: {rnd(40, _HEX)}\n'),
    ("env password", f"DB_PASSWORD={rnd(9)}#{rnd(4)}\n"),
    ("password in prose", f"The staging password is {rnd(8)}!{rnd(3)} (rotate it)\n"),
    # Formats with no distinctive prefix: found only when assigned to a secret-named key.
    ("twilio api key sid", f"twilio: {'S' + 'K'}{rnd(32, _HEX)}\n"),
    ("datadog api key", f"datadog key {rnd(32, _HEX)}\n"),
    ("datadog app key", f"DD_APP_KEY={rnd(40, _HEX)}\n"),
    ("gitlab runner", f"token = \"{'gl' + 'rt-'}{rnd(20, _ALNUM + '-_')}\"\n"),
    ("gitlab runner (new)", f"runner: {'gl' + 'rt-t1_'}{rnd(27, _ALNUM + '-_')}\n"),
    ("gitlab deploy", f"git clone https://gitlab+deploy-token-7:{'gl' + 'dt-'}{rnd(20)}@gitlab.com/x/y.git\n"),
    ("gitlab deploy (bare)", f"deploy token {'gl' + 'dt-'}{rnd(20)}\n"),
    ("gitlab trigger", f"curl -F token={'gl' + 'ptt-'}{rnd(40, _HEX)} -F ref=main\n"),
    ("mailgun (legacy)", f"mailgun: {'ke' + 'y-'}{rnd(32, _HEX)}\n"),
    ("mailgun", f"api: {rnd(32, _HEX)}-{rnd(8, _HEX)}-{rnd(8, _HEX)}\n"),
    ("databricks", f"DATABRICKS_HOST=https://x.cloud.databricks.com\n{'da' + 'pi'}{rnd(32, _HEX)}\n"),
    ("databricks (suffix)", f"pat {'da' + 'pi'}{rnd(32, _HEX)}-2\n"),
    ("docker pat", f"echo {'dckr' + '_pat_'}{rnd(27, _ALNUM + '-_')} | docker login -u me --password-stdin\n"),
    ("docker org token", f"{'dckr' + '_oat_'}{rnd(32, _ALNUM + '-_')}\n"),
    ("discord bot", f"client.run('{discord_token()}')\n"),
    ("discord webhook", f"https://discordapp.com/api/{'web' + 'hooks/'}{rnd(18, _DIGITS)}/{rnd(68, _ALNUM + '-_')}\n"),
    ("telegram bot", f"https://api.telegram.org/bot{rnd(10, _DIGITS)}:{'A' + 'A'}{rnd(33)}/getMe\n"),
    ("age secret key", f"{'AGE-SECRET-' + 'KEY-1'}{rnd(58, _BECH32)}\n"),
    (".netrc", f"machine api.example.com login ci password {rnd(24)}\n"),
    (".netrc (default)", f"default\n    login anonymous\n    password {rnd(12)}!{rnd(4)}\n"),
]

# Lines that look like secrets to a naive scanner and must never be flagged.
_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + _rng.randbytes(300)).decode()
NEAR_MISSES: list[tuple[str, str]] = [
    ("uuids", "\n".join("-".join(rnd(n, _HEX) for n in (8, 4, 4, 4, 12)) for _ in range(5)) + "\n"),
    ("git shas", "\n".join(f"{rnd(40, _HEX)} commit message {i}" for i in range(5)) + "\n"),
    ("sha256 sums", "\n".join(f"{rnd(64, _HEX)}  dist/pkg-{i}.tar.gz" for i in range(5)) + "\n"),
    ("base64 image", f"![plot](data:image/png;base64,{_PNG})\n"),
    ("lorem ipsum", "Lorem ipsum dolor sit amet, consectetur adipiscing elit. Sed do eiusmod tempor "
                    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud.\n"),
    ("package-lock integrity", "\n".join(
        f'"integrity": "sha512-{rnd(86, _B64)}==",' for _ in range(5)) + "\n"),
    ("yarn.lock", f'  resolved "https://registry.yarnpkg.com/left-pad/-/left-pad-1.3.0.tgz#{rnd(40, _HEX)}"\n'
                  f"  integrity sha1-{rnd(27, _B64)}=\n"),
    ("poetry.lock", f'files = [{{file = "x-1.0.whl", hash = "sha256:{rnd(64, _HEX)}"}}]\n'),
    ("go.sum", f"golang.org/x/text v0.3.7 h1:{rnd(43, _B64)}=\n"),
    ("Cargo.lock", f'checksum = "{rnd(64, _HEX)}"\n'),
    ("subresource integrity", f'<script src="x.js" integrity="sha384-{rnd(64, _B64)}"></script>\n'),
    ("docker digest", f"FROM python:3.12@sha256:{rnd(64, _HEX)}\n"),
    ("ssh public key", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{rnd(43, _B64)} me@laptop\n"),
    ("placeholder password", 'password = "changeme"\npassword: ${DB_PASSWORD}\npassword: <your password>\n'),
    ("password prose", "The password is stored in vault; the password was rotated on Monday.\n"),
    ("basic auth placeholder", f"Authorization: Basic {_b64('user:password')}\n"),
    ("base64 prose", f"echo {_b64('hello world, these are ordinary notes about the build')} | base64 -d\n"),
    ("slack docs webhook", "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX\n"),
    ("aws docs key", "AK" + "IAIOSFODNN7EXAMPLE\n"),
    ("bcrypt hash", "password_hash: $2b$12$" + rnd(53, _ALNUM + "./") + "\n"),
    ("camelCase identifiers", "tokenRefreshHandlerFactory = buildTokenRefreshHandlerFactory(config)\n"),
    ("markdown table", "| model | max_tokens | cost |\n|---|---|---|\n| gpt-4o | 4096 | $0.01 |\n"),
    ("long identifiers", "test_the_recorded_command_never_holds_the_credential_in_any_form_whatsoever\n"),
    (".netrc placeholders", "machine example.com login me password <token>\nmachine h login u password $TOKEN\n"
                            "machine h2 login u password ***\n"),
    ("machine prose", "The machine learning team asked for a password manager; machine password is rotated.\n"),
    ("key-value prose", "a key-value store; api-key-rotation-2024; monkey-" + rnd(32, _HEX) + "\n"),
    ("lorem dapibus", "Curabitur dapibus, dapi " + rnd(31, _HEX) + " and dapi" + rnd(20, _HEX) + "\n"),
    ("dotted identifiers", "MyVeryLongClassNameForTests.method.another_very_long_attribute_name\n"),
    ("times and ratios", "at 12:30:45, ratio 16:9, id 1234567890:A-batch, 2024:AAAA\n"),
    ("twilio-like hex", "SKIP " + rnd(32, _HEX) + "; SK" + rnd(32, "0123456789ABCDEF") + "\n"),
    ("datadog ids", "datadog trace id " + rnd(32, _HEX) + "\ndd if=/dev/zero of=x bs=1M count=" + rnd(3, _DIGITS)
                    + "\n"),
    ("age public key", "recipient: age1" + rnd(58, _BECH32.lower()) + "\n"),
    ("token placeholders", "dckr" + "_pat_<your token here>\n" + "gl" + "rt-XXXXXXXXXXXXXXXXXXXX\n"
                           + "AGE-SECRET-" + "KEY-1" + "X" * 58 + "\n"),
    ("discord docs", "https://discord.com/api/" + "webhooks/{webhook.id}/{webhook.token}\n"),
]


@pytest.mark.attack
def test_corpus_of_real_formats(figures: Figures) -> None:
    """Every format is found (before: GitLab runner and deploy tokens, Mailgun, Databricks, Docker,
    Discord, Telegram, age keys, .netrc passwords, Twilio and Datadog keys were missed)."""
    missed = [name for name, text in FORMATS if not scan(text)]
    figures.add("secret formats", len(FORMATS))
    figures.add("secret formats found", len(FORMATS) - len(missed))
    assert len(FORMATS) >= 50
    assert missed == []


@pytest.mark.attack
def test_corpus_of_near_misses(figures: Figures) -> None:
    flagged = [(name, scan(text)) for name, text in NEAR_MISSES if scan(text)]
    figures.add("near-miss texts", len(NEAR_MISSES))
    figures.add("near-miss texts flagged", len(flagged))
    assert flagged == []


def test_the_projects_own_text_is_not_flagged() -> None:
    root = Path(__file__).resolve().parents[3]
    paths = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / "memsync").rglob("*.py")),
             Path(__file__), root / "tests" / "stories" / "test_secrets_policy.py"]
    flagged = [f for p in paths for f in scan_bytes(str(p.relative_to(root)), p.read_bytes())]
    assert flagged == []


def test_ascii_after_a_utf16_looking_start_is_still_found() -> None:
    data = "UTF-16 header text, long enough to decide".encode("utf-16-le") + f"\ntoken={_ghp}\n".encode()
    assert [f.rule for f in scan_bytes("mixed.bin", data)] == ["github-token"]


@pytest.mark.slow
def test_utf16_strings_in_binary_across_a_chunk_boundary_are_found_once() -> None:
    head = bytes(range(1, 256)).replace(b"\n", b"") * (CHUNK_BYTES // 254 + 1)
    for shift in (-40, -41, -12, -4, 0, 1):
        start = CHUNK_BYTES + shift
        data = head[:start] + f"token={_ghs}".encode("utf-16-le") + b"\x00\x01" * 64
        assert [f.rule for f in scan_bytes("app.db", data)] == ["github-token"], shift


def test_random_binary_data_scans_quickly() -> None:
    data = random.Random(3).randbytes(2 * CHUNK_BYTES)
    assert scan_bytes("photo.jpg", data) == []
    assert _timed(data) < 5  # typically ~0.2 s; loose for loaded CI machines
