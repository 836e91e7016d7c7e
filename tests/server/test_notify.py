"""What a host sees while research runs (server/notify.py): logs filtered by level, resource updates for
subscribers, list changes; in both protocol eras, with the SDK client in memory and over real HTTP."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp import types as t
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from test_http import connect, http_server

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.notify import short
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

TOY = "toy-quadratic"


async def until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    """Notifications arrive on their own time: wait for one, never longer than `timeout`."""
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def set_level(client: Client, level: t.LoggingLevel) -> None:
    """logging/setLevel without the SDK's deprecated helper (the method is handshake-era only)."""
    request = t.SetLevelRequest(params=t.SetLevelRequestParams(level=level))
    await client.session.send_request(request, t.EmptyResult)


async def subscribe(client: Client, uri: str) -> None:
    request = t.SubscribeRequest(params=t.SubscribeRequestParams(uri=uri))
    await client.session.send_request(request, t.EmptyResult)


def events(logs: list[t.LoggingMessageNotificationParams]) -> list[tuple[str, str]]:
    return [(log.level, log.data["event"]) for log in logs]


@pytest.mark.asyncio
async def test_a_handshake_host_is_sent_only_logs_at_or_above_the_level_it_set(settings: ServerSettings):
    logs: list[t.LoggingMessageNotificationParams] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    server = build_server(Research(settings))
    async with Client(server, mode="legacy", logging_callback=on_log) as host:
        assert host.server_capabilities.logging is not None
        await set_level(host, "warning")
        run_id = (await call(host, "start_run", {"task": TOY, "budget": 5}))["run_id"]
        await call(host, "run_experiment", {"params": {"x": 0.3}})  # ok: its end is info
        await call(host, "run_experiment", {"params": {"x": 9.0}})  # crashes: its end is a warning
        assert (await host.call_tool("run_experiment", {"params": {"x": 0.3}})).is_error  # a repeat
        await until(lambda: ("warning", "refused") in events(logs))
        assert events(logs) == [("warning", "experiment_ended"), ("warning", "refused")]
        crash, refusal = (log.data for log in logs)
        assert crash == {
            "event": "experiment_ended",
            "run_id": run_id,
            "task": TOY,
            "iteration": 2,
            "status": "crash",
            "metric": None,
            "new_best": False,
            "duration_s": crash["duration_s"],
            "budget_left": 3,
        }
        assert refusal["kind"] == "exact_repeat" and refusal["tool"] == "run_experiment"
        assert all(log.logger == "autoresearch" for log in logs)

        logs.clear()
        await set_level(host, "debug")
        await call(host, "run_experiment", {"params": {"x": 1.0}})
        await until(lambda: ("info", "experiment_ended") in events(logs))
        assert events(logs) == [("debug", "experiment_started"), ("info", "experiment_ended")]
        assert logs[0].data["params"] == {"x": 1.0, "y": 0.0, "sleep": 0.0}


@pytest.mark.asyncio
async def test_a_modern_client_gets_the_logs_of_its_own_calls_at_or_above_its_level(
    settings: ServerSettings,
):
    server = build_server(Research(settings))
    seen: dict[str, list[t.LoggingMessageNotificationParams]] = {"warning": [], "debug": [], "none": []}

    def collect(into: list[t.LoggingMessageNotificationParams]):
        async def on_log(params: t.LoggingMessageNotificationParams) -> None:
            into.append(params)

        return on_log

    async with (
        Client(server, log_level="warning", logging_callback=collect(seen["warning"])) as warned,
        Client(server, log_level="debug", logging_callback=collect(seen["debug"])) as chatty,
        Client(server, logging_callback=collect(seen["none"])) as quiet,
    ):
        run_id = (await call(chatty, "start_run", {"task": TOY, "budget": 9}))["run_id"]
        await call(chatty, "run_experiment", {"params": {"x": 1.0}, "run_id": run_id})
        await call(warned, "run_experiment", {"params": {"x": 2.0}, "run_id": run_id})
        await call(warned, "run_experiment", {"params": {"x": 9.0}, "run_id": run_id})
        await call(quiet, "run_experiment", {"params": {"x": 9.0, "y": 1}, "run_id": run_id})
        # a request's logs ride that request: they have arrived when its result has
    assert events(seen["debug"]) == [
        ("info", "run_started"),
        ("debug", "experiment_started"),
        ("info", "experiment_ended"),
    ]
    assert events(seen["warning"]) == [("warning", "experiment_ended")]
    assert seen["warning"][0].data["iteration"] == 3 and seen["warning"][0].data["status"] == "crash"
    assert seen["none"] == []


@pytest.mark.asyncio
async def test_a_subscribed_host_is_told_when_another_clients_experiment_ends(settings: ServerSettings):
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, t.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    server = build_server(Research(settings))
    async with Client(server, mode="legacy", message_handler=on_message) as host, Client(server) as agent:
        assert host.server_capabilities.resources.subscribe is True
        watched = (await call(agent, "start_run", {"task": TOY, "name": "watched"}))["run_id"]
        other = (await call(agent, "start_run", {"task": TOY, "name": "other"}))["run_id"]
        summary = f"autoresearch://runs/{watched}/summary"
        await subscribe(host, summary)
        await call(agent, "run_experiment", {"params": {"x": 1.0}, "run_id": other})
        await call(agent, "run_experiment", {"params": {"x": 1.0}, "run_id": watched})
        await until(lambda: summary in updates)
        assert updates == [summary]  # nothing about the other run, nor about what it did not subscribe to

        await host.session.send_request(
            t.UnsubscribeRequest(params=t.UnsubscribeRequestParams(uri=summary)), t.EmptyResult
        )
        await call(agent, "run_experiment", {"params": {"x": 2.0}, "run_id": watched})
        await subscribe(host, f"autoresearch://runs/{other}/summary")
        await call(agent, "run_experiment", {"params": {"x": 2.0}, "run_id": other})
        await until(lambda: len(updates) == 2)
        assert updates == [summary, f"autoresearch://runs/{other}/summary"]


@pytest.mark.asyncio
async def test_a_listening_modern_client_hears_of_runs_and_of_another_clients_experiments(
    settings: ServerSettings,
):
    server = build_server(Research(settings))
    async with Client(server) as watcher, Client(server) as agent:
        run_id = (await call(agent, "start_run", {"task": TOY}))["run_id"]
        summary = f"autoresearch://runs/{run_id}/summary"
        async with watcher.listen(resource_subscriptions=[summary], resources_list_changed=True) as stream:
            events_seen = aiter(stream)
            await call(agent, "run_experiment", {"params": {"x": 1.0}})
            with anyio.fail_after(5):
                assert await anext(events_seen) == ResourceUpdated(summary)
            await call(agent, "start_run", {"task": TOY})
            with anyio.fail_after(5):
                assert await anext(events_seen) == ResourcesListChanged()


@pytest.mark.asyncio
async def test_starting_a_run_tells_every_handshake_client_the_resource_list_changed(
    settings: ServerSettings,
):
    changes: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, t.ResourceListChangedNotification):
            changes.append("list_changed")

    server = build_server(Research(settings))
    async with Client(server, mode="legacy", message_handler=on_message) as host, Client(server) as agent:
        assert host.server_capabilities.resources.list_changed is True
        await host.list_resources()  # what a host does first; by then its connection is known
        await call(agent, "start_run", {"task": TOY})
        await until(lambda: changes == ["list_changed"])


@pytest.mark.asyncio
async def test_a_host_sees_a_background_jobs_states_in_order(settings: ServerSettings):
    logs: list[t.LoggingMessageNotificationParams] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    with Research(settings.model_copy(update={"workers": 1})) as research:
        server = build_server(research)
        async with Client(server, mode="legacy", logging_callback=on_log) as host, Client(server) as agent:
            await set_level(host, "debug")
            await call(agent, "start_run", {"task": TOY})
            job_id = (await call(agent, "submit_training_job", {"params": {"x": 1.0}}))["job"]["id"]
            await until(lambda: ("info", "job_changed") in events(logs), timeout=60)
    jobs = [(log.level, log.data["status"]) for log in logs if log.data["event"] == "job_changed"]
    assert jobs == [("debug", "queued"), ("debug", "running"), ("info", "done")]
    assert all(log.data["job_id"] == job_id for log in logs if log.data["event"] == "job_changed")
    ended = events(logs).index(("info", "experiment_ended"))
    assert events(logs)[ended + 1 :] == [("info", "job_changed")]  # the experiment is recorded first


def test_log_texts_are_one_short_line_without_directories():
    assert (
        short("cannot read /home/alice/secret/data.csv: gone\nTraceback ...") == "cannot read data.csv: gone"
    )
    assert short(r"C:\Users\bob\train.py failed") == "train.py failed"
    assert short("see autoresearch://runs/r-1/summary") == "see autoresearch://runs/r-1/summary"
    assert len(short("x" * 1000) or "") == 200
    assert short("  ") is None and short(None) is None


@pytest.mark.asyncio
async def test_over_http_a_host_sees_another_clients_run_in_its_logs_and_subscriptions(
    tmp_path: Path, covtype_csv: Path, isolated_data_dir: Path
):
    logs: list[t.LoggingMessageNotificationParams] = []
    updates: list[str] = []

    async def on_log(params: t.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_message(message: Any) -> None:
        if isinstance(message, t.ResourceUpdatedNotification):
            updates.append(message.params.uri)

    with http_server(tmp_path / "runs.db", covtype_csv, isolated_data_dir) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with (
            Client(url, mode="legacy", logging_callback=on_log, message_handler=on_message) as host,
            connect(port) as agent,
        ):
            await set_level(host, "info")
            run_id = (await call(agent, "start_run", {"task": TOY, "budget": 3}))["run_id"]
            summary = f"autoresearch://runs/{run_id}/summary"
            await subscribe(host, summary)
            await call(agent, "run_experiment", {"params": {"x": 0.5}, "run_id": run_id})
            await until(lambda: summary in updates and ("info", "experiment_ended") in events(logs))
            ended = next(log.data for log in logs if log.data["event"] == "experiment_ended")
            assert ended["run_id"] == run_id and ended["status"] == "ok" and ended["metric"] is not None
            assert ("debug", "experiment_started") not in events(logs)
