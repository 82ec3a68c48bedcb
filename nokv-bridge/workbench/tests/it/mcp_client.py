"""Drive `nokv mcp` with the Python `mcp` client library (a real MCP client).

Arguments: the nokv binary, the server URL, the repository, the state
directory of pending appends (NOKV_STATE_DIR). Prints one JSON
object summarising what the session saw; exits non-zero on any failure.
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def attr(obj, snake, camel):
    """The field under the SDK's snake_case name (2.x) or camelCase (1.x)."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


async def main(nokv, url, repo, state):
    params = StdioServerParameters(
        command=nokv,
        args=["--server", url, "--repo", repo, "--agent-root", "mcpbot", "mcp"],
        env=dict(os.environ, NOKV_STATE_DIR=state),
    )
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            out["server"] = attr(init, "server_info", "serverInfo").name
            out["protocol"] = attr(init, "protocol_version", "protocolVersion")
            await session.send_ping()
            tools = (await session.list_tools()).tools
            out["tools"] = [t.name for t in tools]
            out["closed_schemas"] = all(attr(t, "input_schema", "inputSchema").get("additionalProperties") is False for t in tools)
            r = await session.call_tool("workbench_create", {"id": "mcp1"})
            out["create"] = attr(r, "structured_content", "structuredContent")
            r = await session.call_tool("workbench_put_file", {"id": "mcp1", "section": "outputs", "path": "x.txt", "text": "from mcp"})
            out["put_error"] = attr(r, "is_error", "isError")
            r = await session.call_tool("workbench_read", {"id": "mcp1", "section": "outputs", "path": "x.txt"})
            out["read"] = json.loads(r.content[0].text)
            # The same append twice, each answered: two appends.
            out["appends"] = []
            for _ in range(2):
                r = await session.call_tool("workbench_append", {"id": "mcp1", "section": "logs", "path": "run.log", "text": "step\n"})
                out["appends"].append(attr(r, "structured_content", "structuredContent"))
            r = await session.call_tool("workbench_read", {"id": "mcp1", "section": "logs", "path": "run.log"})
            out["log"] = json.loads(r.content[0].text)["lines"]
            r = await session.call_tool("workbench_put_file", {"id": "mcp1", "section": "outputs", "path": "../escape", "text": "x"})
            out["escape"] = {"isError": attr(r, "is_error", "isError"), "error": attr(r, "structured_content", "structuredContent")}
    print(json.dumps(out))


asyncio.run(main(*sys.argv[1:5]))
