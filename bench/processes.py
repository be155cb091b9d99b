"""Two Daphne processes against one on this machine (issue 35 §4: two serve at least 1.7x one, c64, both wires).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/7 \
        .venv/bin/python bench/processes.py [--seconds 10] [--rounds 2]

Prints figures; it is not a test. The load is wrk (Debian's, C: it takes little of the two cores the
servers share) sending `tools/call echo` over 64 keep-alive connections: legacy requests spread over
64 sessions opened beforehand (any process serves any session: they live in Redis), or 2026-07-28
requests with no session. One process gets all 64 connections; two get 32 each (a wrk of its own),
their requests a second summed. The layouts alternate --rounds times, each wire in turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from loadgen import MODERN_META, MODERN_VERSION, make_clients
from procs import HOST, daphne_server, prepare_database, running, with_db_name

LUA = """
local sessions = {%(sessions)s}
local n = 0
request = function()
  n = n + 1
  local headers = {["Content-Type"] = "application/json", ["Accept"] = "application/json, text/event-stream"}
  %(headers)s
  return wrk.format("POST", "/t/demo/mcp", headers, %(body)s)
end
"""


def script(folder: Path, wire: str, sessions: list[str]) -> Path:
    if wire == "legacy":
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hi"}},
        }
        headers = (
            'headers["Mcp-Session-Id"] = sessions[(n %% #sessions) + 1]\n'
            '  headers["MCP-Protocol-Version"] = "2025-06-18"'
        )
    else:
        params = {"name": "echo", "arguments": {"message": "hi"}, "_meta": MODERN_META}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        headers = (
            f'headers["MCP-Protocol-Version"] = "{MODERN_VERSION}"\n'
            '  headers["Mcp-Method"] = "tools/call"\n  headers["Mcp-Name"] = "echo"'
        )
    path = folder / f"{wire}.lua"
    text = LUA % {
        "sessions": ", ".join(json.dumps(s) for s in sessions),
        "headers": headers.replace("%%", "%"),
        "body": json.dumps(json.dumps(call, separators=(",", ":"))),
    }
    path.write_text(text)
    return path


def wrk(port: int, connections: int, seconds: float, lua: Path) -> subprocess.Popen[str]:
    threads = 2 if connections > 32 else 1
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds:.0f}s",
        "-s",
        str(lua),
        f"http://{HOST}:{port}/",
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def rate(proc: subprocess.Popen[str]) -> tuple[float, str]:
    out, _ = proc.communicate()
    found = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if found is None or errors is not None:
        raise SystemExit(f"wrk failed or got errors:\n{out}")
    return float(found.group(1)), out


async def main_async(args: argparse.Namespace) -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("bench/processes.py needs wrk (apt-get install wrk)")
    base, redis_url = os.environ["DATABASE_URL"], os.environ["REDIS_URL"]
    env = prepare_database(with_db_name(base, "mcp_bench_processes"), redis_url)
    env.update(MCP_TOOL_CALLS_PER_MINUTE="0")
    results: dict[tuple[str, int], list[float]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="mcp-bench-processes-") as folder,
        running(daphne_server(env, None, label="p1")) as one,
        running(daphne_server(env, None, label="p2")) as two,
    ):
        await one.wait_ready()
        await two.wait_ready()
        clients = await make_clients(64, HOST, one.port, "/t/demo/mcp")
        scripts = {
            "legacy": script(Path(folder), "legacy", [c.session_id or "" for c in clients]),
            "modern": script(Path(folder), "modern", []),
        }
        for lua in scripts.values():  # warm both processes on each wire
            for server in (one, two):
                rate(wrk(server.port, 16, 2, lua))
        for _ in range(args.rounds):
            for wire, lua in scripts.items():
                single, _out = rate(wrk(one.port, 64, args.seconds, lua))
                results.setdefault((wire, 1), []).append(single)
                pair = [wrk(one.port, 32, args.seconds, lua), wrk(two.port, 32, args.seconds, lua)]
                results.setdefault((wire, 2), []).append(sum(rate(proc)[0] for proc in pair))
        for client in clients:
            await client.close()
    print(f"\ntools/call echo, 64 connections, {args.seconds:.0f} s a run, {args.rounds} rounds (req/s)")
    for wire in ("legacy", "modern"):
        ones, twos = results[(wire, 1)], results[(wire, 2)]
        ratios = [b / a for a, b in zip(ones, twos, strict=True)]
        print(
            f"  {wire:7} one process {', '.join(f'{x:.0f}' for x in ones)}; two {', '.join(f'{x:.0f}' for x in twos)};"
            f" two/one {', '.join(f'{r:.2f}x' for r in ratios)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
