"""Peer for bench/run.py: a FastMCP 4.x aggregator with persistent upstream sessions (one stdio child per upstream, shared).
python fm_agg.py PORT name=cmd,arg,arg name2=cmd,arg ...
Tools appear as <name>_<tool>. Serves Streamable HTTP at http://127.0.0.1:PORT/mcp
"""
import asyncio, sys
from fastmcp import FastMCP, Client
from fastmcp.client.transports import StdioTransport
from fastmcp.server import create_proxy

async def main():
    port = int(sys.argv[1])
    parent = FastMCP("fm-agg")
    clients = []
    for spec in sys.argv[2:]:
        name, cmd = spec.split("=", 1)
        parts = cmd.split(",")
        c = Client(StdioTransport(command=parts[0], args=parts[1:]))
        await c.__aenter__()                     # connected client => session reused for all requests
        clients.append(c)
        parent.mount(create_proxy(c), namespace=name or None)   # "=cmd" => no prefix
    try:
        await parent.run_http_async(host="127.0.0.1", port=port, show_banner=False, log_level="WARNING")
    finally:
        for c in clients:
            await c.__aexit__(None, None, None)

asyncio.run(main())
