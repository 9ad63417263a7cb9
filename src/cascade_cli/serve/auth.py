"""The reward service's shared token (`--token` / CASCADE_REWARD_TOKEN) and how a request carries it.

OpenRLHF 0.11.2's HTTP reward client (`SingleTurnAgentExecutor._fetch_rewards_via_http`) posts
`session.post(url, json=...)` with no headers, so the token must travel inside `--reward.remote_url`:
- as the first path segment: `http://HOST:PORT/<token>/get_reward` (the form cascade prints and builds);
- as a query parameter: `http://HOST:PORT/get_reward?token=<token>`;
- or, for clients that can send headers, `Authorization: Bearer <token>`.

A token is required whenever the service binds an address that is not loopback. Tokens are compared with
`hmac.compare_digest`, and never written to a log or the console: paths are masked before logging, and
`RedactingFilter` scrubs the literal from every record that reaches the service's log handlers.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import os
import re
from urllib.parse import parse_qs, urlsplit, urlunsplit

from cascade_cli.errors import CascadeUsageError

TOKEN_ENV = "CASCADE_REWARD_TOKEN"
TOKEN_REF = f"${TOKEN_ENV}"  # what printed plans carry instead of the literal
MASK = "***"
MIN_TOKEN_CHARS = 16
# URL-safe without escaping (path segment and query value alike), and no comma: OpenRLHF splits
# --reward.remote_url on commas. secrets.token_urlsafe() produces exactly this alphabet.
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._~-]+$")
MAKE_ONE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; anything else (0.0.0.0, ::, a hostname, an interface address) is
    reachable from the network."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def resolve_token(token: str | None, host: str) -> str | None:
    """The token to enforce (the option, else CASCADE_REWARD_TOKEN), checked; CascadeUsageError (exit 2) when
    a non-loopback `host` has none or the token is unusable in a URL."""
    if token is None:
        token = os.environ.get(TOKEN_ENV) or None
    if token is None:
        if not is_loopback(host):
            raise CascadeUsageError(
                f"--host {host}: a reward service reachable from the network needs a token; pass --token or set "
                f"{TOKEN_ENV} (make one with: {MAKE_ONE}), or bind 127.0.0.1"
            )
        return None
    if len(token) < MIN_TOKEN_CHARS or not _TOKEN_CHARS.match(token):
        raise CascadeUsageError(
            f"--token / {TOKEN_ENV}: expected at least {MIN_TOKEN_CHARS} characters of A-Z a-z 0-9 . _ ~ - "
            f"(it travels in the URL); found {len(token)} characters"
            + ("" if _TOKEN_CHARS.match(token) else " with others among them")
            + f"; make one with: {MAKE_ONE}"
        )
    return token


def _same(candidate: str | None, token: str) -> bool:
    return candidate is not None and hmac.compare_digest(candidate.encode(), token.encode())


def split_token_path(path: str, token: str | None) -> tuple[bool, str]:
    """(the first path segment is the token, the path without it)."""
    if token is None:
        return False, path
    head, _, rest = path.lstrip("/").partition("/")
    if _same(head, token):
        return True, "/" + rest
    return False, path


def authorized(token: str | None, path: str, query_token: str | None, authorization: str | None) -> bool:
    """Whether a request carries `token` (any of the three places); always True when no token is set."""
    if token is None:
        return True
    bearer = None
    if authorization and authorization[:7].lower() == "bearer ":
        bearer = authorization[7:].strip()
    # Evaluate all three (no short-circuit), so the time taken does not say which one was tried.
    found = [split_token_path(path, token)[0], _same(query_token, token), _same(bearer, token)]
    return any(found)


def url_with_token_ref(url: str, token: str | None) -> str:
    """`url` with the token as its first path segment, written as the reference `$CASCADE_REWARD_TOKEN`
    (plans are printed and manifests written: never the literal). Unchanged without a token, or when the URL
    already carries one (the reference, or ?token=); a literal copy of `token` becomes the reference."""
    if not token:
        return url
    if token in url:
        return url.replace(token, TOKEN_REF)
    parts = urlsplit(url)
    if TOKEN_REF in url or "token" in parse_qs(parts.query):
        return url
    return urlunsplit(parts._replace(path=f"/{TOKEN_REF}{parts.path}"))


def expand_token_ref(argv: list[str]) -> list[str]:
    """`argv` with `$CASCADE_REWARD_TOKEN` replaced by the variable's value, for the moment a job is handed to
    the cluster (Ray quotes every argument, so its shell would not expand the reference)."""
    if not any(TOKEN_REF in arg for arg in argv):
        return argv
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise CascadeUsageError(
            f"--reward.remote_url carries {TOKEN_REF}, but {TOKEN_ENV} is not set here; export the reward "
            "service's token before submitting"
        )
    return [arg.replace(TOKEN_REF, token) for arg in argv]


def masked_url(host: str, port: int, token: str | None, route: str = "/get_reward") -> str:
    """The service URL for the console: the token segment masked."""
    return f"http://{host}:{port}" + (f"/{MASK}" if token else "") + route


class RedactingFilter(logging.Filter):
    """Replaces the token's literal in every record passing a handler (aiohttp's own messages included)."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.token in message:
            record.msg, record.args = message.replace(self.token, MASK), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and self.token in record.exc_text:
            record.exc_text = record.exc_text.replace(self.token, MASK)
        return True


def install_redaction(token: str | None) -> None:
    """Add a RedactingFilter to every handler of the root logger (call after logging is configured)."""
    if token:
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter(token))


def with_token_env(submit_args: list[str]) -> list[str]:
    """`ray job submit` arguments whose --runtime-env-json also carries CASCADE_REWARD_TOKEN (when set here),
    so the agent inside the job can reach a token-protected reward service."""
    token = os.environ.get(TOKEN_ENV)
    if not token or "--runtime-env-json" not in submit_args:
        return submit_args
    index = submit_args.index("--runtime-env-json") + 1
    runtime_env = json.loads(submit_args[index])
    runtime_env.setdefault("env_vars", {})[TOKEN_ENV] = token
    return [*submit_args[:index], json.dumps(runtime_env), *submit_args[index + 1 :]]
