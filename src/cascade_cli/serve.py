"""HTTP reward service for OpenRLHF (`--reward.remote_url http://HOST:PORT/get_reward`), over the verifier
registry: `cascade verify --serve`.

POST (any path) `{"query": [...], "prompts": [...], "labels": [...]}` -> `{"rewards", "scores",
"extra_logs"}` (see reward_protocol.py for the exact shapes). `GET /health` -> status. A request that breaks
the protocol (malformed JSON, a missing field, an unknown domain) gets HTTP 400 and a message; a record the
verifier cannot read is a reward-0 row with `verify_error = 1`. Verification runs in worker processes with a
per-request timeout, never on the event loop. Several services can sit behind OpenRLHF's comma-separated
list of URLs: each is independent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import time
from typing import Any

from aiohttp import web

from cascade_cli import rm_rewards, verifiers
from cascade_cli.errors import CascadeRunError
from cascade_cli.reward_protocol import ProtocolError, VerifierPool, build_records, make_reply
from cascade_cli.verifiers.batch import Options

log = logging.getLogger("cascade.serve")

MAX_BODY_BYTES = 512 * 1024 * 1024  # SWE labels carry whole source files
SERVICE_KEY = web.AppKey("service", object)


class RewardService:
    def __init__(
        self,
        workers: int = 1,
        timeout_s: float = 60.0,
        domain: str | None = None,
        options: Options | None = None,
        registrations: dict[str, str] | None = None,
        reward_model: str | None = None,
    ) -> None:
        self.domain = domain
        # --reward-model: RLHF (domain general) and IF-RL's RM bonus, see rm_rewards.py
        self.rm = rm_rewards.RewardModelScorer(reward_model) if reward_model else None
        self.extra_domains = (rm_rewards.RM_DOMAIN,) if self.rm else ()
        self.workers = workers
        self.timeout_s = timeout_s
        self.pool = VerifierPool(workers, timeout_s, options, registrations)
        self.requests = 0
        self.bad_requests = 0
        self.started = time.time()

    async def score(self, records: list[dict[str, Any]], options: dict[str, Any] | None = None):
        options = options or rm_rewards.DEFAULT_OPTIONS
        if rm_rewards.needs_rm(records, options):
            if self.rm is None:
                raise ProtocolError("'cascade.if_rm' needs a reward model: `cascade verify --serve --reward-model CKPT`")
            return await rm_rewards.score_with_rm(records, options, self.rm, self.score)
        future = self.pool.submit(records)
        with contextlib.suppress(Exception):  # collect() turns a timeout or a dead worker into reward-0 rows
            await asyncio.wrap_future(future)
        return self.pool.collect(future, len(records))

    def close(self) -> None:
        self.pool.close()


def _bad_request(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


async def _health(request: web.Request) -> web.Response:
    service: RewardService = request.app[SERVICE_KEY]
    return web.json_response(
        {
            "status": "ok",
            "domains": verifiers.known_domains(),
            "default_domain": service.domain,
            "workers": service.workers,
            "timeout_s": service.timeout_s,
            "requests": service.requests,
            "bad_requests": service.bad_requests,
            "uptime_s": round(time.time() - service.started, 3),
        }
    )


async def _reward(request: web.Request) -> web.Response:
    service: RewardService = request.app[SERVICE_KEY]
    start = time.perf_counter()
    service.requests += 1
    try:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ProtocolError(f"malformed JSON body: {error}") from None
        records = build_records(body, service.domain, service.extra_domains)
        options = rm_rewards.request_options(body)
        results = await service.score(records, options)
    except ProtocolError as error:
        service.bad_requests += 1
        log.info("POST %s 400 %.1f ms: %s", request.path, (time.perf_counter() - start) * 1000, error)
        return _bad_request(str(error))
    reply = make_reply(results, with_details=bool(body.get("return_details")))
    domains = ",".join(sorted({record["domain"] for record in records}))
    errors = sum(result.error is not None for result in results)
    log.info(
        "POST %s 200 n=%d domain=%s mean_reward=%.4f errors=%d %.1f ms",
        request.path,
        len(records),
        domains,
        sum(result.reward for result in results) / len(results),
        errors,
        (time.perf_counter() - start) * 1000,
    )
    return web.json_response(reply)


def create_app(service: RewardService) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app[SERVICE_KEY] = service
    app.router.add_get("/health", _health)
    app.router.add_post("/{tail:.*}", _reward)
    return app


async def start_site(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start serving `app`; returns the runner and the bound port (useful with port 0)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    return runner, bound


def run_server(host: str = "127.0.0.1", port: int = 5000, **settings: Any) -> None:
    """Serve until SIGINT / SIGTERM; `settings` are RewardService's (workers, timeout_s, domain, options)."""
    from cascade_cli.console import console

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    service = RewardService(**settings)

    async def main() -> None:
        runner, bound = await start_site(create_app(service), host, port)
        console.print(
            f"cascade reward service on http://{host}:{bound} ({service.workers} worker(s), "
            f"timeout {service.timeout_s:g} s); "
            f"OpenRLHF: --reward.remote_url http://{host}:{bound}/get_reward",
            soft_wrap=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()

    try:
        asyncio.run(main())
    except OSError as error:  # the port is taken, the address is not ours, ...
        raise CascadeRunError(f"the reward service cannot listen on {host}:{port}: {error}") from None
    finally:
        service.close()
