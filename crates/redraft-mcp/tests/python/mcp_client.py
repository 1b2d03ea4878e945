"""Drive `redraft mcp` with the official MCP Python SDK, as an MCP host would: start the server
over stdio, list its tools and call each one.

Usage:
    mcp_client.py --cwd DIR --context JSON [--stray-check-only] -- SERVER [ARG ...]

The fake model behind the server must answer the `iterate` call wrongly, then rightly. On
success a JSON report is printed on stdout; on any failure the reason is printed on stderr and
the exit status is 1. Anything on the server's stdout that is not a JSON-RPC message fails the
run: the client logs it and hands it to the session as an exception, and both are caught here.
"""

import argparse
import json
import logging
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

TOOLS = ["answer", "decide", "example", "iterate", "submit", "validate"]

SCHEMA = {
    "type": "object",
    "required": ["city", "state"],
    "properties": {"city": {"type": "string"}, "state": {"enum": ["OH", "KY"]}},
}

# What is not protocol on the server's stdout, as the SDK reports it.
not_protocol: list[str] = []


class CatchErrors(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            not_protocol.append(record.getMessage())


async def on_message(message) -> None:
    if isinstance(message, Exception):
        not_protocol.append(f"{type(message).__name__}: {message}")


class Failure(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise Failure(what)


def text(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


def structured(result, tool: str):
    check(not result.is_error, f"`{tool}` answered with an error: {text(result)}")
    check(isinstance(result.structured_content, dict), f"`{tool}` has no structured content")
    # Clients that read only text get the same JSON.
    check(json.loads(text(result)) == result.structured_content, f"`{tool}`: text and structured content differ")
    return result.structured_content


def check_stdout_is_protocol() -> None:
    check(not not_protocol, f"the server wrote something that is not protocol on stdout: {not_protocol}")


async def session_run(args, report: dict) -> None:
    params = StdioServerParameters(command=args.server[0], args=args.server[1:], cwd=args.cwd)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, message_handler=on_message) as session:
            init = await session.initialize()
            report["server"] = init.server_info.name
            listed = await session.list_tools()
            report["tools"] = sorted(t.name for t in listed.tools)
            check(report["tools"] == TOOLS, f"the tools are {report['tools']}, not {TOOLS}")
            # A request answered after the listing: whatever the server wrote on stdout before
            # answering it has been read (and reported) by then.
            await session.send_ping()
            check_stdout_is_protocol()
            if args.stray_check_only:
                return

            # iterate: a wrong answer, then a right one.
            result = await session.call_tool(
                "iterate",
                {"prompt": "Where is contract C-7? Answer with its city and state.", "schema": SCHEMA,
                 "max_iterations": 3, "timeout": "30s"},
            )
            run = structured(result, "iterate")
            check(run["status"] == "succeeded", f"iterate: {run['status']} ({run.get('escalation')})")
            check(run["iterations"] == 2, f"iterate took {run['iterations']} attempts, not 2")
            check(run["artifact"] == {"city": "Toledo", "state": "OH"}, f"iterate: artifact {run['artifact']}")
            report["iterate"] = {k: run[k] for k in ("run_id", "status", "iterations", "artifact")}

            # iterate awaiting a person, then answer: a wrong answer stops the run awaiting input,
            # and the answer continues it to a right one.
            result = await session.call_tool(
                "iterate",
                {"prompt": "Where is contract C-8?", "schema": SCHEMA, "max_iterations": 1,
                 "on_escalation": "await", "timeout": "30s"},
            )
            waiting = structured(result, "iterate")
            check(waiting["status"] == "awaiting_input", f"iterate with await: {waiting['status']}")
            check(bool(waiting["escalation"]["question"]), f"no question: {waiting['escalation']}")
            result = await session.call_tool(
                "answer", {"run_id": waiting["run_id"], "answer": "C-8 is in Toledo, OH."})
            answered = structured(result, "answer")
            check(answered["status"] == "succeeded", f"answer: {answered['status']} ({answered.get('escalation')})")
            report["answer"] = {
                "status": answered["status"],
                "iterations": answered["iterations"],
                "reply": answered["history"][1]["reply"]["answer"],
            }
            result = await session.call_tool("answer", {"run_id": waiting["run_id"], "answer": "again"})
            check(result.is_error and "not awaiting" in text(result), f"a second answer: {text(result)}")

            # validate: a fill whose first worker is in the wrong city.
            context = json.loads(args.context)
            wrong = {"fills": [{"worker_id": "W-1"}, {"worker_id": "W-2"}]}
            result = await session.call_tool(
                "validate", {"target_type": "fill", "artifact": wrong, "context": context})
            report["validate"] = structured(result, "validate")
            check(report["validate"]["passed"] is False, "validate passed a wrong fill")

            # example: the kind's example and schema.
            result = await session.call_tool("example", {"target_type": "fill"})
            shown = structured(result, "example")
            check("fills" in shown["example"] and shown["schema"]["type"] == "object", f"example: {shown}")
            report["example"] = {"example_source": shown["example_source"], "example": shown["example"]}

            # submit: wrong, wrong, right.
            report["submit"] = []
            for workers in (["W-1", "W-2"], ["W-2", "W-4"], ["W-2", "W-3"]):
                fill = {"contract_id": "C-7", "fills": [{"worker_id": w} for w in workers]}
                result = await session.call_tool(
                    "submit", {"target_type": "fill", "artifact": fill, "context": context})
                check(not result.is_error, f"submit answered with an error: {text(result)}")
                report["submit"].append(text(result))
            check("Attempt 2 of 3" in report["submit"][1], f"the second answer: {report['submit'][1]}")
            check("accepted" in report["submit"][2], f"the third answer: {report['submit'][2]}")

            # decide: a failing test at the last iteration escalates.
            result = await session.call_tool(
                "decide",
                {"task_id": "task-003", "current_iteration": 3, "max_iterations": 3,
                 "test_result": {"status": "fail", "output": "FAIL login.test.ts\n  Expected: token\n  Received: undefined"},
                 "review_result": {"status": "pending", "feedback": ""}},
            )
            report["decide"] = structured(result, "decide")["decision"]
            check(report["decide"]["action"] == "escalate", f"decide: {report['decide']}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--context", default="{}")
    parser.add_argument("--stray-check-only", action="store_true")
    parser.add_argument("server", nargs="+")
    args = parser.parse_args()
    logging.getLogger("mcp").addHandler(CatchErrors())
    report: dict = {}
    try:
        anyio.run(session_run, args, report)
        check_stdout_is_protocol()
    except Failure as e:
        print(f"mcp_client: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
