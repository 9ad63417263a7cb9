"""HTTP reward service for OpenRLHF (`--reward.remote_url http://HOST:PORT/get_reward`), over the verifier
registry: `cascade verify --serve`.

POST (any path) `{"query": [...], "prompts": [...], "labels": [...]}` -> `{"rewards", "scores",
"extra_logs"}` (see protocol.py for the exact shapes). `GET /health` -> status. A request that breaks
the protocol (malformed JSON, a missing field, an unknown domain) gets HTTP 400 and a message; a record the
verifier cannot read is a reward-0 row with `verify_error = 1`. Verification runs in supervised worker
processes with a per-request timeout, never on the event loop (workers.py: a killed worker is
replaced and its request retried once). Several services can sit behind OpenRLHF's comma-separated list of
URLs: each is independent.

On a shared network (auth.py): with a token (`--token` / CASCADE_REWARD_TOKEN, required off
loopback) every request must carry it as the first path segment (`/<token>/get_reward`, `/<token>/health`),
`?token=`, or `Authorization: Bearer`, else 401. Bodies over `max_body_bytes` and requests of more than
`max_samples` samples get 413. Each refused request is one log line: status, reason, client address; the
token never reaches a log line or the console.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from cascade_cli import verifiers
from cascade_cli.errors import CascadeRunError
from cascade_cli.serve import rm_rewards
from cascade_cli.serve.auth import (
    MASK,
    TOKEN_REF,
    authorized,
    install_redaction,
    masked_url,
    resolve_token,
    split_token_path,
)
from cascade_cli.serve.protocol import ProtocolError, build_records, make_reply
from cascade_cli.serve.user_reward import RewardFunction
from cascade_cli.serve.workers import WorkerPool
from cascade_cli.verifiers.batch import Options, RowResult, row_error
from cascade_cli.verifiers.reward_model import RM_DOMAIN, RewardModelScorer

log = logging.getLogger("cascade.serve")

MAX_BODY_BYTES = 512 * 1024 * 1024  # SWE labels carry whole source files
MAX_SAMPLES = 1024  # OpenRLHF sends one sample per request; batching clients send a group or a few
SERVICE_KEY = web.AppKey("service", object)
GUARD_KEY = web.AppKey("guard", object)


@dataclass
class Guard:
    """What a request must satisfy before it is scored (the HTTP layer's limits)."""

    token: str | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    max_samples: int = MAX_SAMPLES


class RewardService:
    def __init__(
        self,
        workers: int = 1,
        timeout_s: float = 60.0,
        domain: str | None = None,
        options: Options | None = None,
        registrations: dict[str, str] | None = None,
        reward_model: str | None = None,
        reward_func: str | None = None,
        reward_func_isolation: str = "none",
        reward_func_memory_mb: int = 4096,
    ) -> None:
        self.domain = domain
        # --reward-func: the user's function scores every request (user_reward.py), not the verifiers
        self.user_reward = (
            RewardFunction(reward_func, reward_func_isolation, timeout_s, reward_func_memory_mb) if reward_func else None
        )
        # --reward-model: RLHF (domain general) and IF-RL's RM bonus, see rm_rewards.py
        self.rm = RewardModelScorer(reward_model) if reward_model else None
        self.extra_domains = (RM_DOMAIN,) if self.rm else ()
        self.workers = workers
        self.timeout_s = timeout_s
        self.pool = WorkerPool(workers, timeout_s, options, registrations)
        self.requests = 0
        self.bad_requests = 0
        self.refused: Counter[int] = Counter()  # HTTP status -> count (400, 401, 413)
        self.started = time.time()

    async def score(self, records: list[dict[str, Any]], options: dict[str, Any] | None = None):
        options = options or rm_rewards.DEFAULT_OPTIONS
        if rm_rewards.needs_rm(records, options):
            if self.rm is None:
                raise ProtocolError("'cascade.if_rm' needs a reward model: `cascade verify --serve --reward-model CKPT`")
            return await rm_rewards.score_with_rm(records, options, self.rm, self.score)
        # The pool always completes the future: rows, or reward-0 rows for a timeout or a twice-dead worker.
        return await asyncio.wrap_future(self.pool.submit(records))

    async def score_with_function(self, body: Any) -> list[RowResult]:
        """A request scored by the user's function, called once on the whole batch, off the event loop."""
        queries, prompts, labels = user_request(body)
        start = time.perf_counter()
        rewards, passed, error = await asyncio.to_thread(self.user_reward, queries, prompts, labels)
        latency = (time.perf_counter() - start) / len(queries)
        if error:
            log.warning("reward_func failed: %s", error)
            return [row_error(error, latency) for _ in queries]
        return [RowResult(reward, verdict, {}, latency) for reward, verdict in zip(rewards, passed, strict=True)]

    def close(self) -> None:
        self.pool.close()
        if self.user_reward is not None:
            self.user_reward.close()


def user_request(body: Any) -> tuple[list[str], list[str], list[Any]]:
    """(queries, prompts, labels) of a request for the user's function: labels go to it as OpenRLHF sent
    them (the function reads them), so only the shapes are checked."""
    if not isinstance(body, dict):
        raise ProtocolError(f"expected a JSON object with query, prompts, labels; found {type(body).__name__}")
    queries = body.get("query", body.get("queries"))
    queries = [queries] if isinstance(queries, str) else queries
    if not isinstance(queries, list) or not queries or not all(isinstance(q, str) for q in queries):
        raise ProtocolError("'query' must be a non-empty list of strings")
    prompts = body.get("prompts") or [""] * len(queries)
    labels = body.get("labels")
    labels = labels if isinstance(labels, list) else [labels] * len(queries)
    if not len(queries) == len(prompts) == len(labels):
        raise ProtocolError(
            f"query, prompts and labels must have the same length; found {len(queries)}, {len(prompts)}, {len(labels)}"
        )
    return queries, prompts, labels


def _route(request: web.Request) -> tuple[str, str]:
    """(the path without the token segment, the path as it may be logged)."""
    guard: Guard = request.app[GUARD_KEY]
    in_path, route = split_token_path(request.path, guard.token)
    return route, (f"/{MASK}{route}" if in_path else route)


def _refuse(request: web.Request, status: int, message: str, shown_path: str | None) -> web.Response:
    """The one log line of a refused request (no token: a 401's path may hold a wrong guess, so none)."""
    service: RewardService = request.app[SERVICE_KEY]
    service.refused[status] += 1
    where = f" {shown_path}" if shown_path is not None else ""
    log.warning("refused %s%s %d from %s: %s", request.method, where, status, request.remote, message)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return web.json_response({"error": message}, status=status, headers=headers)


@web.middleware
async def _check_token(request: web.Request, handler):
    guard: Guard = request.app[GUARD_KEY]
    if not authorized(
        guard.token, request.path, request.query.get("token"), request.headers.get("Authorization")
    ):
        return _refuse(
            request,
            401,
            "missing or wrong token: send it as the first path segment (http://HOST:PORT/<token>/get_reward), "
            "as ?token=<token>, or as 'Authorization: Bearer <token>'",
            None,
        )
    return await handler(request)


async def _get(request: web.Request) -> web.Response:
    route, _ = _route(request)
    if route.rstrip("/") != "/health":
        return web.json_response({"error": "no such resource; GET /health or POST a reward request"}, status=404)
    service: RewardService = request.app[SERVICE_KEY]
    stats = service.pool.stats
    return web.json_response(
        {
            "status": "ok",
            "domains": verifiers.known_domains(),
            "default_domain": service.domain,
            "workers": service.workers,
            "worker_pids": service.pool.worker_pids(),
            "workers_restarted": stats.restarts,
            "worker_deaths_in_flight": stats.deaths_in_flight,
            "retried_requests": stats.retries,
            "timed_out_requests": stats.timeouts,
            "timeout_s": service.timeout_s,
            "requests": service.requests,
            "bad_requests": service.bad_requests,
            "refused": {str(status): count for status, count in sorted(service.refused.items())},
            "uptime_s": round(time.time() - service.started, 3),
        }
    )


async def _read_body(request: web.Request, guard: Guard, shown: str) -> Any:
    """The parsed body; a web.Response for a refusal (413), ProtocolError for malformed JSON."""
    too_big = f"request body over {guard.max_body_bytes} bytes (the service's --max-body-mb)"
    if request.content_length is not None and request.content_length > guard.max_body_bytes:
        return _refuse(request, 413, f"{too_big}: Content-Length {request.content_length}", shown)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:  # a chunked body that grew past the limit
        return _refuse(request, 413, too_big, shown)
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ProtocolError(f"malformed JSON body: {error}") from None
    queries = body.get("query", body.get("queries")) if isinstance(body, dict) else None
    if isinstance(queries, list) and len(queries) > guard.max_samples:
        return _refuse(
            request,
            413,
            f"too many samples: {len(queries)} in one request; this service takes at most {guard.max_samples} "
            "(--max-samples); split the batch",
            shown,
        )
    return body


async def _reward(request: web.Request) -> web.Response:
    service: RewardService = request.app[SERVICE_KEY]
    _, shown = _route(request)
    start = time.perf_counter()
    service.requests += 1
    try:
        body = await _read_body(request, request.app[GUARD_KEY], shown)
        if isinstance(body, web.Response):
            return body
        if service.user_reward is not None:
            results = await service.score_with_function(body)
            records = [{"domain": "reward_func"}]
        else:
            records = build_records(body, service.domain, service.extra_domains)
            results = await service.score(records, rm_rewards.request_options(body))
    except ProtocolError as error:
        service.bad_requests += 1
        return _refuse(request, 400, str(error), shown)
    reply = make_reply(results, with_details=bool(body.get("return_details")))
    domains = ",".join(sorted({record["domain"] for record in records}))
    errors = sum(result.error is not None for result in results)
    log.info(
        "POST %s 200 n=%d domain=%s mean_reward=%.4f errors=%d %.1f ms",
        shown,
        len(results),
        domains,
        sum(result.reward for result in results) / len(results),
        errors,
        (time.perf_counter() - start) * 1000,
    )
    return web.json_response(reply)


def create_app(service: RewardService, guard: Guard | None = None) -> web.Application:
    guard = guard or Guard()
    # +1 KiB: our own 413 (with its log line) answers before aiohttp's bare one would.
    app = web.Application(client_max_size=guard.max_body_bytes + 1024, middlewares=[_check_token])
    app[SERVICE_KEY] = service
    app[GUARD_KEY] = guard
    app.router.add_get("/{tail:.*}", _get)
    app.router.add_post("/{tail:.*}", _reward)
    return app


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving `app`; returns the runner and the bound port (useful with port 0)."""
    runner = web.AppRunner(app, access_log=None)  # aiohttp's access log would print paths (and tokens)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, bound


def run_server(
    host: str = "127.0.0.1",
    port: int = 5000,
    token: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_samples: int = MAX_SAMPLES,
    **settings: Any,
) -> None:
    """Serve until SIGINT / SIGTERM; `settings` are RewardService's (workers, timeout_s, domain, options).
    CascadeUsageError (exit 2) before anything starts when a non-loopback host has no token."""
    from cascade_cli.console import console

    guard = Guard(resolve_token(token, host), max_body_bytes, max_samples)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    install_redaction(guard.token)
    service = RewardService(**settings)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):  # before the announcement: a stop right after it is clean
            loop.add_signal_handler(sig, stop.set)
        runner, bound = await start_site(create_app(service, guard), host, port)
        url = f"http://{host}:{bound}/{TOKEN_REF}/get_reward" if guard.token else masked_url(host, bound, None)
        user = service.user_reward
        scorer = f"reward_func {user.spec}, isolation {user.isolation}" if user else f"{service.workers} worker(s)"
        console.print(
            f"cascade reward service on {masked_url(host, bound, guard.token, '')} ({scorer}, "
            f"timeout {service.timeout_s:g} s, {'token required' if guard.token else 'no token'}, "
            f"body <= {guard.max_body_bytes} bytes, <= {guard.max_samples} samples/request); "
            f"OpenRLHF: --reward.remote_url {url}",
            soft_wrap=True,
            markup=False,
        )
        await stop.wait()
        await runner.cleanup()

    try:
        asyncio.run(main())
    except OSError as error:  # the port is taken, the address is not ours, ...
        raise CascadeRunError(f"the reward service cannot listen on {host}:{port}: {error}") from None
    finally:
        service.close()
