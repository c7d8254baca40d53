"""The secret scanner's rules: which text is a likely secret (see memsync.secrets for scanning).

:func:`candidates` returns ``(start, end, priority, rule, preview)`` tuples; the preview is safe
to print.

Rules (``RULE_IDS``)
--------------------
``private-key``
    ``-----BEGIN ... PRIVATE KEY-----`` (PEM, OpenSSH, encrypted PEM, PGP
    ``PRIVATE KEY BLOCK``).  One finding per block; the header must be
    followed by base64 key material, so a bare header in prose or a header
    followed by ``...`` / ``<your key>`` is not reported.
``aws-access-key``
    ``AKIA`` / ``ASIA`` + 16 base32 characters (``[A-Z2-7]``).
``aws-secret-key``
    A 40 character base64 value assigned to ``aws_secret_access_key``,
    ``AWS_SECRET_ACCESS_KEY``, ``SecretAccessKey``, ``secret_access_key``...
``github-token``
    ``ghp_`` / ``gho_`` / ``ghu_`` / ``ghs_`` / ``ghr_`` + 36 alphanumerics,
    and fine-grained ``github_pat_...`` tokens.
``gitlab-token``
    ``glpat-...`` personal access tokens.
``slack-token``
    ``xoxa-`` / ``xoxb-`` / ``xoxp-`` / ``xoxr-`` / ``xoxs-`` tokens and
    ``xapp-`` app-level tokens.
``slack-webhook``
    ``hooks.slack.com/services/T.../B.../...`` (also ``workflows/``,
    ``triggers/``); Slack's documentation example (``XXXX...``) is not reported.
``sendgrid-api-key``
    ``SG.`` + 22 + ``.`` + 43 base64url characters.
``azure-storage-key``
    ``AccountKey=`` / ``SharedAccessKey=`` + 40-100 base64 characters
    (storage, Service Bus and Event Hubs connection strings).
``google-oauth-secret``
    ``GOCSPX-`` + 28 characters.
``digitalocean-token``
    ``dop_v1_`` / ``doo_v1_`` / ``dor_v1_`` + 64 hex digits.
``pypi-token``
    ``pypi-AgEIcHlwaS5vcmc...`` upload tokens.
``shopify-token``
    ``shpat_`` / ``shpca_`` / ``shppa_`` / ``shpss_`` + 32 hex digits.
``google-api-key``
    ``AIza`` + 35 characters.
``stripe-live-key``
    ``sk_live_...`` / ``rk_live_...`` (test-mode keys are not reported).
``openai-api-key``
    ``sk-...``, ``sk-proj-...``, ``sk-svcacct-...`` (upper, lower case and
    digits required, so ``sk-learn-style-words`` is not a key).
``anthropic-api-key``
    ``sk-ant-...``.
``huggingface-token``
    ``hf_`` + 30 or more mixed-case alphanumerics.
``npm-token``
    ``npm_`` + 36 alphanumerics.
``jwt``
    Three base64url segments, the header starting with ``eyJ`` (``{"``) and
    the payload with ``ey``.
``url-password``
    ``scheme://user:password@host``, unless the password is a placeholder
    (``***``, ``<token>``, ``$VAR``, ``${VAR}``, ``{{var}}``, ``password``,
    ``xxx``, ``x-oauth-basic``...), shorter than 4 characters
    (``a:b@``, ``abc:xyz@`` in documentation) or equal to the user name
    (``guest:guest@``).
``basic-auth``
    ``Basic <base64 of user:password>`` whose password is not a placeholder
    (same placeholder rules as ``url-password``).
``base64-secret``
    A base64 or base64url run of 24+ characters that decodes to printable
    text in which another rule finds a secret (a Kubernetes Secret's
    ``data:``, a wrapped token in JSON).  Each run is decoded once (at most
    its first 64 KiB) and the decoded text is scanned once, without a second
    level of decoding, so the cost is bounded by about twice the text's.
``high-entropy-assignment``
    A key whose name contains ``api_key`` / ``apikey`` / ``secret`` /
    ``token`` / ``password`` / ``passwd`` / ``access_key`` / ``private_key`` /
    ``client_secret`` (any case, snake/kebab/camel case, e.g.
    ``OPENAI_API_KEY``, ``clientSecret``, ``"auth-token"``), followed by
    ``=``, ``:``, ``:=`` or ``=>`` and a quoted or bare value of at least
    20 characters that looks random:

    * Shannon entropy >= 3.5 bits/char (>= 3.0 for pure-hex values).
      Measured on uniformly random base62/base64 strings, 99.9 % of
      20-character values are above 3.48 and 24-character ones above 3.74,
      while patterned human strings (``hunter2hunter2hunter2`` 2.8,
      ``Password123Password123`` 3.3, ``changeme-changeme-2024`` 3.4) stay
      below 3.5; 3.5 is also the threshold gitleaks uses for its generic
      rule.  Hex only has 16 symbols (max 4.0 bits/char; random 32-hex
      strings are above 3.1 with 99.9 % probability), so it gets the 3.0
      limit detect-secrets uses for hex strings.
    * Entropy alone cannot tell ``getApiKeyFromEnvironment`` (3.8) from a
      key, so the value must also contain letters *and* digits (or be
      mixed case without looking like camelCase words), and must not be a
      placeholder (``<...>``, ``$VAR``, ``${VAR}``, ``{{...}}``, ``***``,
      ``your_...``, ``...example...``), a path, a URL, a UUID, a dotted
      identifier chain, a function call or a plain ``WORD_WORD_2`` label.
    * Keys that name *metadata about* a secret are ignored: ``token_count``,
      ``max_tokens``, ``secret_name``, ``api_key_id``, ``password_hint``,
      ``token_url``, ``secret_sha256``...
    * After ``password`` / ``passwd`` (also in prose: ``the password is X``),
      values of 8-19 characters are reported when they have at least three of
      upper case, lower case, digits and symbols, an entropy of at least
      log2(length) - 0.5 bits per character (nearly every character distinct)
      and no weak or placeholder word (``changeme``, ``password``,
      ``P@ssw0rd``, ``hunter``, ``letmein``, ``admin``...).  So
      ``password = "changeme"`` and "the password is stored in vault" are not
      reported, a random 12-character password is.

Example values are not reported: bodies containing ``EXAMPLE`` (such as the
AWS documentation key ``AKIAIOSFODNN7EXAMPLE``), ``xxxx``, ``placeholder``,
``redacted`` or ``1234567890``, bodies with a run of six identical
characters and bodies made of at most two distinct characters.
"""

import binascii
import math

from memsync.checks import secret_formats
from memsync.util.lazyre import LazyRe

__all__ = ["RULE_IDS", "Candidate", "candidates", "secret_name"]

RULE_IDS: tuple[str, ...] = (
    "private-key",
    "aws-access-key",
    "aws-secret-key",
    "github-token",
    "gitlab-token",
    "slack-token",
    "slack-webhook",
    "sendgrid-api-key",
    "azure-storage-key",
    "google-oauth-secret",
    "digitalocean-token",
    "pypi-token",
    "shopify-token",
    "google-api-key",
    "stripe-live-key",
    "openai-api-key",
    "anthropic-api-key",
    "huggingface-token",
    "npm-token",
    "jwt",
    "url-password",
    "basic-auth",
    "base64-secret",
    "high-entropy-assignment",
    *secret_formats.RULE_IDS,
)

_ENTROPY_THRESHOLD = 3.5
_HEX_ENTROPY_THRESHOLD = 3.0
_MIN_GENERIC_LEN = 20


# --------------------------------------------------------------------------
# Prefixed tokens.  Each regex starts with a literal so the regex engine can
# skip through the text quickly; "not preceded by a word character" is a
# look-behind placed after the literal.  The named group ``body`` is the
# random part checked against placeholders and for character classes.
# Entries: (rule, regex, required classes of the body).  Class
# requirement: 0 = none, 2 = at least two of upper/lower/digit, 3 = upper,
# lower and digit, 4 = upper and lower.

_W = r"A-Za-z0-9_"  # word characters
_WD = r"A-Za-z0-9_\-"  # word characters and dash

_TOKEN_RULES: tuple[tuple[str, LazyRe[str], int], ...] = (
    (
        "aws-access-key",
        LazyRe(r"A(?:KIA|SIA)(?<![A-Za-z0-9]A[KS]IA)(?P<body>[A-Z2-7]{16})(?![A-Za-z0-9])", "AKIA", "ASIA"),
        0,
    ),
    (
        "github-token",
        LazyRe(
            rf"gh[pousr]_(?<![{_W}]gh[pousr]_)(?P<body>[A-Za-z0-9]{{36,251}})(?![{_W}])",
            "gh",
        ),
        2,
    ),
    (
        "github-token",
        LazyRe(rf"github_pat_(?<![{_W}]github_pat_)(?P<body>[A-Za-z0-9_]{{50,244}})(?![{_W}])", "github_pat_"),
        2,
    ),
    ("gitlab-token", LazyRe(rf"glpat-(?<![{_WD}]glpat-)(?P<body>[{_WD}]{{20,200}})(?![{_WD}])", "glpat-"), 2),
    (
        "slack-token",
        LazyRe(
            rf"xox[abprs]-(?<![{_WD}]xox[abprs]-)(?P<body>[0-9]{{1,16}}-[A-Za-z0-9\-]{{8,250}})(?![{_WD}])",
            "xox",
        ),
        2,
    ),
    ("google-api-key", LazyRe(rf"AIza(?<![{_WD}]AIza)(?P<body>[{_WD}]{{35}})(?![{_WD}])", "AIza"), 2),
    # "k_live_" is the literal; the leading s/r is checked by look-behind.
    (
        "stripe-live-key",
        LazyRe(
            rf"k_live_(?<=[sr]k_live_)(?<![{_W}][sr]k_live_)(?P<body>[A-Za-z0-9]{{24,247}})(?![{_W}])", "k_live_"
        ),
        2,
    ),
    # "sk-ant-..." is Anthropic, any other "sk-..." OpenAI (see _prefixed_tokens).
    ("openai-api-key", LazyRe(rf"sk-(?<![{_WD}]sk-)(?P<body>[{_WD}]{{32,300}})(?![{_WD}])", "sk-"), 3),
    (
        "slack-token",
        LazyRe(
            rf"xapp-(?<![{_WD}]xapp-)(?P<body>[0-9]-[A-Z0-9]{{8,16}}-[0-9]{{8,16}}-[A-Za-z0-9]{{32,128}})(?![{_WD}])",
            "xapp-",
        ),
        2,
    ),
    (
        "slack-webhook",
        LazyRe(
            r"hooks\.slack\.com/(?:services|workflows|triggers)/"
            r"(?P<body>T[A-Z0-9]{6,12}/[AB][A-Z0-9]{6,12}/[A-Za-z0-9]{20,40})(?![A-Za-z0-9])", "hooks.slack.com/"
        ),
        0,
    ),
    ("sendgrid-api-key", LazyRe(rf"SG\.(?<![{_WD}.]SG\.)(?P<body>[{_WD}]{{22}}\.[{_WD}]{{43}})(?![{_WD}])", "SG."), 2),
    (
        "azure-storage-key",
        LazyRe(r"AccountKey=(?P<body>[A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])", "AccountKey="),
        3,
    ),
    (
        "azure-storage-key",
        LazyRe(r"SharedAccessKey=(?P<body>[A-Za-z0-9+/]{40,100}={0,2})(?![A-Za-z0-9+/=])", "SharedAccessKey="),
        3,
    ),
    ("google-oauth-secret", LazyRe(rf"GOCSPX-(?<![{_WD}]GOCSPX-)(?P<body>[{_WD}]{{28}})(?![{_WD}])", "GOCSPX-"), 2),
    (
        "digitalocean-token",
        LazyRe(rf"_v1_(?<=do[por]_v1_)(?<![{_W}]do[por]_v1_)(?P<body>[a-f0-9]{{64}})(?![{_W}])", "_v1_"),
        0,
    ),
    # "AgEIcHlwaS5vcmc" is the start of every upload token's macaroon (base64 of "...pypi.org").
    (
        "pypi-token",
        LazyRe(
            rf"pypi-AgEIcHlwaS5vcmc(?<![{_WD}]pypi-AgEIcHlwaS5vcmc)(?P<body>[{_WD}]{{50,400}})(?![{_WD}])",
            "pypi-AgEIcHlwaS5vcmc",
        ),
        2,
    ),
    (
        "shopify-token",
        LazyRe(
            rf"shp(?:at|ca|pa|ss)_(?<![{_W}]shp[a-z]{{2}}_)(?P<body>[a-fA-F0-9]{{32}})(?![{_W}])",
            "shp",
        ),
        0,
    ),
    ("huggingface-token", LazyRe(rf"hf_(?<![{_W}]hf_)(?P<body>[A-Za-z0-9]{{30,60}})(?![{_W}])", "hf_"), 4),
    ("npm-token", LazyRe(rf"npm_(?<![{_W}]npm_)(?P<body>[A-Za-z0-9]{{36}})(?![{_W}])", "npm_"), 2),
    (
        "jwt",
        LazyRe(
            rf"eyJ(?<![{_WD}]eyJ)(?P<body>[{_WD}]{{8,4000}}\.ey[{_WD}]{{8,8000}}\.[{_WD}]{{8,2000}}={{0,2}})(?![{_WD}=])",
            "eyJ",
        ),
        0,
    ),
)

# --------------------------------------------------------------------------
# Private keys.

_PEM_BEGIN_RE = LazyRe(r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----", "-----BEGIN")
_PEM_END_RE = LazyRe(r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----", "-----END")
# Key material right after the header on the same line, e.g. JSON "\n"-escaped.
_PEM_INLINE_BODY_RE = LazyRe(r"(?:\\r|\\n|\s|[\"'`])*[A-Za-z0-9+/=]{32}")
_PEM_HEADER_LINE_RE = LazyRe(r"[\s>#*/\"'`]*[A-Za-z][A-Za-z-]*: ")
_PEM_BODY_LINE_RE = LazyRe(r"[\s>#*/\"'`]*[A-Za-z0-9+/=]{32}")
_PEM_LOOKAHEAD_LINES = 8

# --------------------------------------------------------------------------
# URLs with credentials.  Matched from the literal "://"; the scheme is found
# by walking back.

_URL_AUTH_RE = LazyRe(
    r"://(?P<user>[^\s:@/?#'\"`<>]{0,256}):(?P<pw>[^\s@/?#'\"`]{1,256})@(?P<host>[^\s/?#@'\"`<>)\]]{1,253})", "://"
)
_MIN_URL_PASSWORD_LEN = 4  # "a:b@", "abc:xyz@" are documentation examples
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
_PLACEHOLDER_PASSWORDS = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "changeme",
        "mypassword",
        "yourpassword",
        "your_password",
        "your-password",
        "pw",
        "p",
        "x",
        "x-oauth-basic",
    }
)
_PLACEHOLDER_PASSWORD_RE = LazyRe(r"[*xX.•…_\-]+|[<$%{\[].*|.*(?:\$\{|\{\{|xxx|XXX|\*\*\*).*")

# --------------------------------------------------------------------------
# Generic "key = high-entropy value" assignments.  Keywords are found on a
# lower-cased copy of the text with literal-first regexes.

# key-name tail, optional closing quote / markdown emphasis, operator
# (":=", "=>", "=", "name: Type = ", ":"), then the value.
_KEY_TAIL = r"[A-Za-z0-9_.\-]{0,60}"
_OPERATOR = (
    r"""(?:["'`]|\*\*|__)?[ \t]*"""
    r"(?::=|=>|=(?!=)|:[ \t]*[A-Za-z_][\w.\[\],| ]{0,40}?=(?![=>])|:(?![:/=]))"
    r"[ \t]*"
)
_BARE_VALUE = r"""[^\s"'`,;<>(){}\[\]|\\&]"""
# The keyword searches (run on a lower-cased copy) already require an
# assignment with a value of at least _MIN_GENERIC_LEN characters, so prose
# and short values never reach Python code.
_ASSIGN_AHEAD = (
    rf"""(?={_KEY_TAIL}{_OPERATOR}"""
    rf"""(?:["'`][^"'`\s]{{{_MIN_GENERIC_LEN}}}|{_BARE_VALUE}{{{_MIN_GENERIC_LEN}}}))"""
)
# Passwords: shorter values (see _short_password_ok) and prose ("the password is ...").
_MIN_PASSWORD_LEN = 8
_PROSE_OPERATOR = r"[ \t]+(?:is|was)[ \t]+"
_PASSWORD_AHEAD = (
    rf"""(?={_KEY_TAIL}(?:{_OPERATOR}|{_PROSE_OPERATOR})"""
    rf"""(?:["'`][^"'`\s]{{{_MIN_PASSWORD_LEN}}}|{_BARE_VALUE}{{{_MIN_PASSWORD_LEN}}}))"""
)
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_VALUE = rf"""(?:(?P<q>["'`])(?P<qv>[^"'`\s]{{1,1000}})(?P=q)|(?P<bv>{_BARE_VALUE}{{1,1000}}))"""
_ASSIGN_TAIL_RE = LazyRe(rf"(?P<rest>{_KEY_TAIL}){_OPERATOR}{_VALUE}")
_PASSWORD_TAIL_RE = LazyRe(rf"(?P<rest>{_KEY_TAIL})(?:{_OPERATOR}|(?i:{_PROSE_OPERATOR})){_VALUE}")
_KEYWORD_RES: tuple[tuple[LazyRe[str], LazyRe[str], int], ...] = (
    (LazyRe(r"secret" + _ASSIGN_AHEAD, "secret"), _ASSIGN_TAIL_RE, _MIN_GENERIC_LEN),
    (LazyRe(r"token" + _ASSIGN_AHEAD, "token"), _ASSIGN_TAIL_RE, _MIN_GENERIC_LEN),
    (LazyRe(r"passw(?:or)?d" + _PASSWORD_AHEAD, "passw"), _PASSWORD_TAIL_RE, _MIN_PASSWORD_LEN),
    (
        LazyRe(
            r"key(?:(?<=apikey)|(?<=api_key)|(?<=api-key)|(?<=accesskey)|(?<=access_key)"
            r"|(?<=access-key)|(?<=privatekey)|(?<=private_key)|(?<=private-key))" + _ASSIGN_AHEAD, "key"
        ),
        _ASSIGN_TAIL_RE,
        _MIN_GENERIC_LEN,
    ),
)
_CAMEL_BOUNDARY_RE = LazyRe(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_ALNUM_RE = LazyRe(r"[^a-z0-9]+")
_KEY_KEYWORD_RE = LazyRe(
    r"(?:api_?key|access_?key|private_?key|secret|token|passw(?:or)?d)(?=_|$)",
    "key", "secret", "token", "passw",
)
# Key components (after the keyword) that mean "metadata about a secret".
_KEY_METADATA_WORDS = frozenset(
    {
        "id",
        "ids",
        "name",
        "names",
        "path",
        "file",
        "filename",
        "dir",
        "url",
        "uri",
        "endpoint",
        "host",
        "type",
        "types",
        "count",
        "counts",
        "len",
        "length",
        "limit",
        "limits",
        "max",
        "min",
        "size",
        "env",
        "var",
        "field",
        "header",
        "prefix",
        "suffix",
        "hash",
        "hashed",
        "sha",
        "sha1",
        "sha256",
        "sha512",
        "md5",
        "digest",
        "checksum",
        "fingerprint",
        "ttl",
        "expiry",
        "expires",
        "expiration",
        "scope",
        "scopes",
        "version",
        "arn",
        "ref",
        "kind",
        "mode",
        "format",
        "label",
        "hint",
        "policy",
        "rotation",
        "provider",
        "location",
        "source",
        "usage",
        "budget",
        "cost",
        "rate",
        "index",
        "idx",
        "required",
        "enabled",
        "set",
        "present",
    }
)
_UUID_RE = LazyRe(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX_RE = LazyRe(r"[0-9a-fA-F]+")
_DIGITS_RE = LazyRe(r"[0-9]+")
_DOTTED_IDENT_RE = LazyRe(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# "GITHUB_TOKEN_2", "prod-db-password-2024", "projects/my-proj/secrets/db/versions/3":
# every segment is all letters or all digits.
_LABEL_RE = LazyRe(r"(?:[A-Za-z]+|[0-9]+)(?:[_.\-/:](?:[A-Za-z]+|[0-9]+))+")
_CAMEL_WORDS_RE = LazyRe(r"_*[A-Za-z][a-z]+(?:[A-Z][a-z]+)+")
_WINDOWS_PATH_RE = LazyRe(r"[A-Za-z]:[\\/]")

# --------------------------------------------------------------------------
# Placeholders.

_PLACEHOLDER_WORDS: tuple[str, ...] = (
    "example",
    "xxxx",
    "placeholder",
    "redacted",
    "1234567890",
    "0123456789",
)
_GENERIC_PLACEHOLDER_WORDS: tuple[str, ...] = (
    *_PLACEHOLDER_WORDS,
    "your",
    "changeme",
    "change_me",
    "change-me",
    "replace",
    "dummy",
    "sample",
    "insert",
    "****",
    "...",
    "${",
    "{{",
    "}}",
    "%(",
    "<",
    ">",
)
_SAME_CHAR_RUN_RE = LazyRe(r"(.)\1{5}")
_UPPER_RE = LazyRe(r"[A-Z]")
_LOWER_RE = LazyRe(r"[a-z]")
_DIGIT_RE = LazyRe(r"[0-9]")

# Priorities when several rules match overlapping text (lower wins).
_PRIO_PRIVATE_KEY = 0
_PRIO_TOKEN = 1
_PRIO_AWS_SECRET = 2
_PRIO_URL = 3
_PRIO_BASE64 = 4
_PRIO_GENERIC = 5


def _shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    if not value:
        return 0.0
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_placeholder(body: str, words: tuple[str, ...] = _PLACEHOLDER_WORDS) -> bool:
    low = body.lower()
    if any(w in low for w in words):
        return True
    if len(set(body)) <= 2:
        return True
    return _SAME_CHAR_RUN_RE.search(body) is not None


def _has_classes(body: str, need: int) -> bool:
    if need == 0:
        return True
    upper = _UPPER_RE.search(body) is not None
    lower = _LOWER_RE.search(body) is not None
    if need == 4:
        return upper and lower
    digit = _DIGIT_RE.search(body) is not None
    if need == 3:
        return upper and lower and digit
    return upper + lower + digit >= 2


# A candidate: (start, end, priority, rule, preview).  start/end delimit the
# secret itself (used to resolve overlaps); the line is the line of start.
Candidate = tuple[int, int, int, str, str]


def _private_key_blocks(text: str, out: list[Candidate]) -> None:
    for m in _PEM_BEGIN_RE.finditer(text):
        line_end = text.find("\n", m.end())
        if line_end < 0:
            line_end = len(text)
        if not _pem_has_body(text, m.end(), line_end):
            continue
        end_m = _PEM_END_RE.search(text, m.end())
        end = end_m.end() if end_m else line_end
        kind = m.group()[len("-----BEGIN") : -len("-----")].strip()
        out.append((m.start(), end, _PRIO_PRIVATE_KEY, "private-key", f"-----BEGIN {kind}-----…"))


def _pem_has_body(text: str, header_end: int, line_end: int) -> bool:
    if _PEM_INLINE_BODY_RE.match(text, header_end, line_end):
        return True
    pos = line_end + 1
    for _ in range(_PEM_LOOKAHEAD_LINES):
        if pos >= len(text):
            return False
        nxt = text.find("\n", pos)
        if nxt < 0:
            nxt = len(text)
        line = text[pos:nxt]
        pos = nxt + 1
        if not line.strip() or _PEM_HEADER_LINE_RE.match(line):
            continue
        return _PEM_BODY_LINE_RE.match(line) is not None
    return False


# Characters matched by a look-behind before the literal that starts the regex.
_LOOKBEHIND_PREFIX = {"stripe-live-key": 1, "digitalocean-token": 3}
_LABELLED_RULES = frozenset({"azure-storage-key", "slack-webhook", *secret_formats.LABELLED})
_ALL_TOKEN_RULES = _TOKEN_RULES + secret_formats.TOKEN_RULES


def _prefixed_tokens(text: str, out: list[Candidate]) -> None:
    for rule, regex, need in _ALL_TOKEN_RULES:
        for m in regex.finditer(text):
            body = m.group("body")
            if _looks_placeholder(body) or not _has_classes(body, need):
                continue
            before = secret_formats.lead(regex, text, m.start())
            if before is None:
                continue
            start = m.start() - _LOOKBEHIND_PREFIX.get(rule, 0) - before
            rule_id = rule
            if rule == "openai-api-key" and body.startswith("ant-"):
                rule_id = "anthropic-api-key"
            # At most 4 characters of a token ("ghp_"); a label before it is shown whole.
            label = rule in _LABELLED_RULES
            prefix = text[start : m.start("body")] if label else text[start : start + 4]
            out.append((start, m.end(), _PRIO_TOKEN, rule_id, f"{prefix}…({m.end() - start} chars)"))


def _url_passwords(text: str, out: list[Candidate]) -> None:
    for m in _URL_AUTH_RE.finditer(text):
        start = m.start()
        while start > 0 and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        scheme = text[start : m.start()]
        if not scheme or not scheme[0].isalpha():
            continue
        pw = m.group("pw")
        if len(pw) < _MIN_URL_PASSWORD_LEN or pw == m.group("user"):
            continue
        if pw.lower() in _PLACEHOLDER_PASSWORDS or _PLACEHOLDER_PASSWORD_RE.fullmatch(pw):
            continue
        host = m.group("host")
        if m.end() < len(text) and text[m.end()] == "@":
            host = "…"  # an unencoded "@" in the password: "host" is part of it
        elif len(host) > 40:
            host = host[:40] + "…"
        preview = f"{scheme}://…:…({len(pw)} chars)@{host}"
        out.append((m.start("pw"), m.end("pw"), _PRIO_URL, "url-password", preview))


def _netrc_passwords(text: str, out: list[Candidate]) -> None:
    """`machine HOST login USER password SECRET` (``netrc-password``)."""
    for m in secret_formats.NETRC_RE.finditer(text):
        pw = m.group("pw").rstrip("`'\",;.)")  # prose quoting a .netrc line
        if not _password_ok(pw, "") or pw.isupper():  # `password SECRET`: a placeholder in documentation
            continue
        host = m.group("host") or "default"
        shown = host if len(host) <= 40 else host[:40] + "…"
        out.append((m.start("pw"), m.start("pw") + len(pw), _PRIO_URL, "netrc-password",
                    f"machine {shown}, …({len(pw)} chars)"))


def _normalise_key(key: str) -> str:
    return _NON_ALNUM_RE.sub("_", _CAMEL_BOUNDARY_RE.sub("_", key).lower()).strip("_")


def _is_secret_key_name(norm: str) -> bool:
    matches = list(_KEY_KEYWORD_RE.finditer(norm))
    if not matches:
        return False
    last = matches[-1]
    rest = norm[last.end() :].split("_")
    return not any(part in _KEY_METADATA_WORDS for part in rest)


def secret_name(name: str) -> bool:
    """True if a key, option or variable name (``OPENAI_API_KEY``, ``--client-secret``,
    ``dbPassword``) names a secret rather than metadata about one (``token_count``,
    ``secret_name``, ``password_file``)."""
    return _is_secret_key_name(_normalise_key(name))


def _is_aws_secret_key_name(norm: str) -> bool:
    return ("aws" in norm and "secret" in norm) or "secret_access_key" in norm


def _generic_value_ok(value: str) -> bool:
    if len(value) < _MIN_GENERIC_LEN:
        return False
    if value[0] in "<$%{[*~/\\" or value.startswith(("./", "../")):
        return False
    if "://" in value or _WINDOWS_PATH_RE.match(value):
        return False
    if _looks_placeholder(value, _GENERIC_PLACEHOLDER_WORDS):
        return False
    if (
        _UUID_RE.fullmatch(value)
        or _DIGITS_RE.fullmatch(value)
        or _DOTTED_IDENT_RE.fullmatch(value)
        or _LABEL_RE.fullmatch(value)
    ):
        return False
    has_digit = _DIGIT_RE.search(value) is not None
    has_upper = _UPPER_RE.search(value) is not None
    has_lower = _LOWER_RE.search(value) is not None
    if not (has_upper or has_lower):
        return False
    if not has_digit and not (has_upper and has_lower and not _CAMEL_WORDS_RE.fullmatch(value)):
        return False
    threshold = _HEX_ENTROPY_THRESHOLD if _HEX_RE.fullmatch(value) else _ENTROPY_THRESHOLD
    return _shannon_entropy(value) >= threshold


# Common weak or documentation passwords: not reported as short password values.
_WEAK_PASSWORD_WORDS: tuple[str, ...] = (
    *_GENERIC_PLACEHOLDER_WORDS,
    "password",
    "passw0rd",
    "p@ss",
    "letmein",
    "qwerty",
    "admin",
    "secret",
    "hunter",
    "welcome",
    "default",
    "123456",
    "abc123",
)
_SYMBOL_RE = LazyRe(r"[^A-Za-z0-9_.\-]")


def _short_password_ok(value: str) -> bool:
    """A password value of 8-19 characters that looks like a real one: at least three of upper
    case, lower case, digits and symbols, nearly every character distinct (entropy at least
    log2(length) - 0.5 bits per character), and no common weak or placeholder word."""
    if value[0] in "<$%{[*~/\\" or value.startswith(("./", "../")) or "://" in value:
        return False
    if _looks_placeholder(value, _WEAK_PASSWORD_WORDS):
        return False
    if _DOTTED_IDENT_RE.fullmatch(value) or _LABEL_RE.fullmatch(value) or _CAMEL_WORDS_RE.fullmatch(value):
        return False
    classes = sum(
        rx.search(value) is not None for rx in (_UPPER_RE, _LOWER_RE, _DIGIT_RE, _SYMBOL_RE)
    )
    return classes >= 3 and _shannon_entropy(value) >= math.log2(len(value)) - 0.5


_AWS_SECRET_VALUE_RE = LazyRe(r"[A-Za-z0-9/+]{40}")


def _assignments(text: str, out: list[Candidate]) -> None:
    # U+0130 is the one character whose lower case is two characters long; positions must match.
    low = text.replace("\u0130", "I").lower()
    seen: set[int] = set()
    for kw_re, tail_re, min_len in _KEYWORD_RES:
        for kw in kw_re.finditer(low):
            tail = tail_re.match(text, kw.end())
            if tail is None:
                continue
            group = "qv" if tail.group("qv") is not None else "bv"
            v_start, v_end = tail.span(group)
            if v_start in seen:
                continue
            if v_end - v_start < min_len:
                continue
            if group == "bv" and v_end < len(text) and text[v_end] == "(":
                continue  # a function call, not a literal
            value = text[v_start:v_end]
            start = kw.start()
            limit = max(0, start - 80)
            while start > limit and text[start - 1] in _IDENT_CHARS:
                start -= 1
            key = text[start : tail.end("rest")]
            norm = _normalise_key(key)
            if not _is_secret_key_name(norm):
                continue
            shown_key = key.lstrip("-.")[:40]
            if _is_aws_secret_key_name(norm) and _AWS_SECRET_VALUE_RE.fullmatch(value):
                if _looks_placeholder(value) or not _has_classes(value, 2):
                    continue
                seen.add(v_start)
                preview = f"{shown_key}=…({len(value)} chars)"
                out.append((v_start, v_end, _PRIO_AWS_SECRET, "aws-secret-key", preview))
                continue
            if len(value) < _MIN_GENERIC_LEN:
                if not _short_password_ok(value):
                    continue
            elif not _generic_value_ok(value):
                continue
            seen.add(v_start)
            preview = f"{shown_key}=…({len(value)} chars)"
            out.append((v_start, v_end, _PRIO_GENERIC, "high-entropy-assignment", preview))


# --------------------------------------------------------------------------
# Base64-wrapped secrets: a Kubernetes Secret's `data:`, a basic-auth header.

_MIN_B64_RUN = 24
# Runs are found on a mask of the text (base64 characters as "a", the rest as " ") with str.find,
# about four times faster than a regex over the text itself.
_B64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
_B64_MASK = bytes(ord("a") if chr(i) in _B64_ALPHABET else ord(" ") for i in range(256))
_B64_RUN_NEEDLE = b"a" * _MIN_B64_RUN
_MASK_RUN_RE = LazyRe(rb"a+")
_MAX_B64_RUN = 64 * 1024  # of a longer run (an embedded image) only the start is decoded
_URLSAFE_TO_STD = bytes.maketrans(b"-_", b"+/")
_PRINTABLE = bytes(range(0x20, 0x7F)) + b"\t\r\n"
_USER_PASS_RE = LazyRe(r"([^:\s]{0,256}):(\S{1,256})")


def _base64_wrapped(text: str, out: list[Candidate]) -> None:
    """Decode each base64 run of 24+ characters once; if it decodes to printable text, scan that
    text with every other rule.  Cost: at most one decode of the text and one more scan of
    three quarters of it.  Runs without an upper-case letter (hex digests, identifiers, words)
    are skipped unread: base64 of text holding a token always has one (each 4-character group
    starts with an upper-case letter unless the group's first byte is "h" or above)."""
    mask = text.encode("ascii", "replace").translate(_B64_MASK)  # one byte per character
    start = mask.find(_B64_RUN_NEEDLE)
    while start >= 0:
        match = _MASK_RUN_RE.match(mask, start)
        assert match is not None
        end = match.end()
        if text.startswith("=", end):
            end += 2 if text.startswith("=", end + 1) else 1
        run = text[start:end]
        run_start, start = start, mask.find(_B64_RUN_NEEDLE, end)
        if run.islower():
            continue
        _decode_run(text, run_start, run, out)


def _decode_run(text: str, start: int, run: str, out: list[Candidate]) -> None:
    std, url = "+" in run or "/" in run, "-" in run or "_" in run
    if std and url:
        return  # two alphabets: a path or an identifier, not one base64 value
    raw = run[:_MAX_B64_RUN].rstrip("=").encode("ascii")
    if url:
        raw = raw.translate(_URLSAFE_TO_STD)
    raw = raw[: len(raw) - 1] if len(raw) % 4 == 1 else raw
    try:
        decoded = binascii.a2b_base64(raw + b"=" * (-len(raw) % 4))
    except binascii.Error:
        return
    if len(decoded.translate(None, _PRINTABLE)) * 50 > len(decoded):
        return  # binary (an image, a key's DER body) or not base64 at all
    inner = decoded.decode("ascii", errors="replace")
    found = candidates(inner, nested=False)
    end = start + len(run)
    if found:
        rule = min(found, key=lambda c: c[2])[3]
        out.append((start, end, _PRIO_BASE64, "base64-secret", f"base64 of {rule}…({len(run)} chars)"))
    elif text[max(0, start - 8) : start].lower().rstrip(" \t").endswith("basic"):
        pair = _USER_PASS_RE.fullmatch(inner)
        if pair and _password_ok(pair.group(2), pair.group(1)):
            out.append((start, end, _PRIO_URL, "basic-auth", f"Basic …({len(run)} chars)"))


def _password_ok(pw: str, user: str) -> bool:
    """A URL or basic-auth password that is not an example (see ``url-password``)."""
    if len(pw) < _MIN_URL_PASSWORD_LEN or pw == user:
        return False
    return not (pw.lower() in _PLACEHOLDER_PASSWORDS or _PLACEHOLDER_PASSWORD_RE.fullmatch(pw))


def candidates(text: str, *, nested: bool = True) -> list[Candidate]:
    cands: list[Candidate] = []
    _private_key_blocks(text, cands)
    _prefixed_tokens(text, cands)
    _url_passwords(text, cands)
    _netrc_passwords(text, cands)
    if nested:
        _base64_wrapped(text, cands)
    _assignments(text, cands)
    blocks = [(c[0], c[1]) for c in cands if c[2] == _PRIO_PRIVATE_KEY]
    if blocks:  # everything inside a reported private key block is that block
        cands = [
            c for c in cands if c[2] == _PRIO_PRIVATE_KEY or not any(b0 <= c[0] < b1 for b0, b1 in blocks)
        ]
    return cands
