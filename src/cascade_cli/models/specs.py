"""Model specs that are neither embedded nor a local folder, resolved offline first.

A name without `/` that is no known spec gets a did-you-mean at once (a typo of `smollm2-135m` must not wait
on a hub). A hub id (`org/name`) is looked up in the local Hugging Face cache first; only if it is not there
is the hub asked, and only when it answers within `HUB_TIMEOUT_S` seconds: with `HF_HUB_OFFLINE` set, or a
hub that does not answer, the spec fails at once with one line that says so.
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from pathlib import Path
from urllib.error import HTTPError, URLError
from urllib.parse import quote
from urllib.request import Request, urlopen

from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.real import GGUF_PREFIX, SMOLLM2, is_real_spec

TINY = "tiny"
KNOWN_SPECS = (TINY, f"{TINY}:SEED", SMOLLM2, f"{GGUF_PREFIX}FILE.gguf")
HUB_TIMEOUT_S = 5.0
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
TRUE_WORDS = ("1", "ON", "YES", "TRUE")
TINY_SPEC = re.compile(r"^tiny(?::(\d+))?$")


def is_tiny_spec(spec: object) -> bool:
    """True for `tiny` and `tiny:SEED` (SEED a non-negative integer)."""
    return isinstance(spec, str) and TINY_SPEC.match(spec.strip()) is not None


def is_embedded_spec(spec: object) -> bool:
    """True for every spec the cache builds: `tiny`, `tiny:SEED`, `smollm2-135m`, `gguf:PATH`."""
    return is_tiny_spec(spec) or is_real_spec(spec)


def looks_like_hub_id(spec: str) -> bool:
    """`org/name`: one slash, no leading `/`, `.` or `~` (those are paths)."""
    return spec.count("/") == 1 and not spec.startswith(("/", ".", "~")) and not spec.endswith("/")


def close_spec(name: str) -> str | None:
    """The embedded spec `name` is a likely typo of (`smollm2-135` -> `smollm2-135m`), if any."""
    if "/" in name:
        return None
    close = difflib.get_close_matches(name.split(":")[0] if name.startswith(f"{TINY}:") else name, [TINY, SMOLLM2],
                                      n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_spec(spec: str, what: str = "model") -> CascadeUsageError:
    """The error for a name that is no known spec, no local folder and no hub id, with a did-you-mean."""
    if spec.startswith(f"{TINY}:"):
        return CascadeUsageError(
            f"{what} {spec}: expected `{TINY}` or `{TINY}:SEED` with SEED a non-negative integer; "
            f"found seed {spec.split(':', 1)[1]!r}"
        )
    close = close_spec(spec)
    hint = f"did you mean {close}? " if close else ""
    return CascadeUsageError(
        f"{what} {spec}: not a known model spec, a local folder or a hub id ({hint}known specs: "
        f"{', '.join(KNOWN_SPECS)}; a local checkpoint folder; or a hub id like org/name)"
    )


def check_spec(spec: str | None, key: str) -> None:
    """Fail at once (no model library loaded yet) on a spec that can never resolve: `tiny:abc`, or a name
    without `/` that is no known spec and no local folder."""
    if spec is None or is_embedded_spec(spec):
        return
    spec = str(spec).strip()
    if "/" not in spec and not Path(spec).expanduser().exists():
        raise unknown_spec(spec, key)


def check_hub(spec: str | None, key: str) -> None:
    """Before a local run loads any model library: a hub id that is neither a local folder nor cached must be
    on a hub that answers (a chained recipe's `init` is a folder a stage writes, so `recipe validate` cannot
    ask this)."""
    if spec is not None and looks_like_hub_id(str(spec).strip()) and not Path(str(spec)).expanduser().exists():
        hub_model(str(spec).strip(), key)


def hub_offline() -> bool:
    return any(os.environ.get(name, "").upper() in TRUE_WORDS for name in OFFLINE_ENVS)


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def ask_hub(endpoint: str, repo_id: str, timeout_s: float = HUB_TIMEOUT_S) -> int | None:
    """The HTTP status of the hub's model-info page for `repo_id` (200: it exists), or None when no answer
    came within `timeout_s` (name lookup included: it runs in a thread, as a lookup that hangs ignores
    socket timeouts). One request, no retries."""
    url = f"{endpoint}/api/models/{quote(repo_id, safe='/')}"
    token = os.environ.get("HF_TOKEN")
    request = Request(url, method="GET", headers={"Authorization": f"Bearer {token}"} if token else {})
    answer: list[int] = []

    def ask() -> None:
        try:
            with urlopen(request, timeout=timeout_s) as response:
                answer.append(response.status)
        except HTTPError as error:
            answer.append(error.code)
        except (URLError, OSError):
            pass

    probe = threading.Thread(target=ask, daemon=True)
    probe.start()
    probe.join(timeout_s)
    return answer[0] if answer else None


def cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of a hub model already in the Hugging Face cache (no network)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(repo_id, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None
    return folder if (folder / "config.json").is_file() else None


def hub_model(repo_id: str, what: str = "model") -> Path:
    """Where to load hub model `repo_id` from: its cached snapshot, else the id itself (transformers downloads
    it) once the hub has answered; a usage error at once when offline or the hub does not answer."""
    cached = cached_snapshot(repo_id)
    if cached is not None:
        return cached
    where = f"{what} {repo_id}: no local folder of that name, and not in the local Hugging Face cache"
    if hub_offline():
        raise CascadeUsageError(f"{where}; HF_HUB_OFFLINE is set, so the hub is not asked")
    endpoint = hub_endpoint()
    status = ask_hub(endpoint, repo_id)
    if status is None:
        raise CascadeUsageError(
            f"{where}; the hub ({endpoint}) cannot be reached (no answer within {HUB_TIMEOUT_S:g} s; offline? set "
            "HF_HUB_OFFLINE=1 to use cached models only, or give a local folder)"
        )
    if status in (401, 403):
        raise CascadeUsageError(f"{where}; the hub refuses it (HTTP {status}: a gated or private model needs HF_TOKEN)")
    if status != 200:
        raise CascadeUsageError(f"{where}; the hub ({endpoint}) has no such model (HTTP {status})")
    return Path(repo_id)
