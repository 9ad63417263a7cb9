"""A real RewardService (serve/server.py) on 127.0.0.1:<free port>, its event loop in a thread, for tests that need
a live reward service on loopback next to their own event loop."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from typing import Any

from cascade_cli.serve.server import Guard, RewardService, create_app, start_site


class ServiceThread:
    def __init__(self, service: RewardService, guard: Guard | None = None) -> None:
        self.service = service
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(self.loop)
            self.runner, self.port = self.loop.run_until_complete(start_site(create_app(service, guard), "127.0.0.1", 0))
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=serve, daemon=True)
        self.thread.start()
        assert started.wait(60), "the reward service did not start"
        self.url = f"http://127.0.0.1:{self.port}/get_reward"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.service.close()


def post_once(service: RewardService, body: dict[str, Any]) -> dict[str, Any]:
    """Start `service` on loopback, POST `body` to /get_reward once, stop it; the JSON reply."""
    thread = ServiceThread(service)
    try:
        request = urllib.request.Request(thread.url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(request, timeout=60).read())
    finally:
        thread.close()
