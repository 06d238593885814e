"""A synthetic agent conversation of any length, the same on every run, for the store benchmarks.

Turns of four messages: a user request (some in Chinese), an assistant message with one tool
call, the tool's output (logs, listings, code: the bulk of the text), an assistant answer. About
1.2 KB of text per message on average. The words the recall benchmark looks for appear at known
rates: `error` in about one message in seven, `端口` in about one in thirty, each port a few
thousand times per million, each request id exactly once.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

from precis.core.messages import Message, ToolCall

# The vocabulary of the English text.
_VOCABULARY = (
    "the a to of and in for is on that with this it as be by at from or an are not was have "
    "check run build test deploy service config file module function value request response "
    "cache queue worker thread process memory disk network socket client server proxy route "
    "handler session token user account payment invoice order report export import schema table "
    "column index query migration version release branch commit merge review patch fix update "
    "change remove add rename refactor move copy parse format render validate load save read "
    "write open close start stop restart retry wait timeout limit budget window context summary "
    "message history store backend frontend api endpoint status result output input path "
    "directory package library dependency install upgrade downgrade lock unlock pin metric "
    "latency throughput load balancer replica shard primary standby backup restore log trace "
    "span event alert warning notice debug info level threshold watermark flag option default "
    "custom local remote staging production cluster node pod container image volume secret key "
    "certificate permission role policy rule filter sort page offset cursor batch stream chunk "
    "buffer encode decode compress hash sign verify encrypt digest checksum"
)
WORDS = _VOCABULARY.split()
SUBJECTS = ("billing", "payments", "search", "auth", "ingest", "reports", "gateway", "scheduler")
TOOLS = ("read_file", "grep_repository", "run_tests", "list_directory", "run_command", "http_get")
PORTS = (5432, 5433, 6379, 8080, 8443, 9200, 27017, 3000, 11211, 15672)
ERRORS = (
    "ConnectionError: database connection refused",
    "TimeoutError: request timed out after 30s",
    "PermissionError: permission denied while opening the file",
    "KeyError: 'tenant_id' missing from the payload",
    "ValueError: invalid literal for int() with base 10",
    "AssertionError: expected 200, got 503 from the upstream",
)
CHINESE = (
    "请检查数据库的端口配置，连接一直超时。",
    "把服务的日志级别改成调试，然后重新部署一次。",
    "测试失败了，错误信息在下面，请帮我看看原因。",
    "缓存的过期时间太短，导致请求量突然增加。",
    "不要修改测试文件，只改实现代码。",
    "这个接口的返回格式和文档不一致，需要确认。",
    "迁移脚本执行到一半就停了，数据库被锁住了。",
    "我们把监听端口从八零八零改到了八四四三。",
)
CHINESE_ANSWERS = (
    "已经修改了配置文件，端口现在是正确的，请再试一次。",
    "我查看了日志，问题出在连接池的大小上，已经调大。",
    "测试全部通过，没有改动测试文件。",
    "重新部署完成，服务状态正常，延迟恢复到平时水平。",
)
CJK_EVERY = 4  # one user request in this many is written in Chinese


def _pool() -> list[list[str]]:
    """Sentences of 0 to 24 words, 512 of each length, made once (picking words is slow)."""
    rng = random.Random(0)
    return [
        [" ".join(rng.choices(WORDS, k=n)).capitalize() + "." for _ in range(512)]
        for n in range(25)
    ]


SENTENCES = _pool()


def _sentence(rng: random.Random, words: int) -> str:
    return SENTENCES[words][rng.getrandbits(9)]


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(SUBJECTS)}/module_{rng.randrange(400)}.py"


def request_id(turn: int) -> str:
    """A token that appears in exactly one message: the user request of this turn."""
    return f"req-{turn * 2654435761 % (1 << 32):08x}"


def _user(rng: random.Random, turn: int) -> str:
    rid = request_id(turn)
    if turn % CJK_EVERY == 0:
        return f"{rng.choice(CHINESE)} {rng.choice(CHINESE)} 编号 {rid}，路径 {_path(rng)}。"
    text = " ".join(_sentence(rng, rng.randrange(8, 20)) for _ in range(rng.randrange(2, 5)))
    return f"{text} See {_path(rng)} (ticket {rid}, port {rng.choice(PORTS)})."


def _call(rng: random.Random, turn: int) -> tuple[str, ToolCall]:
    name = rng.choice(TOOLS)
    args = {"path": _path(rng), "pattern": rng.choice(WORDS), "limit": rng.randrange(10, 500)}
    call = ToolCall(f"call_{turn:09d}", name, json.dumps(args))
    return f"Let me {name.replace('_', ' ')} to {_sentence(rng, 8).lower()}", call


def _output(rng: random.Random, turn: int) -> str:
    lines: list[str] = []
    failing = rng.random() < 0.3
    for n in range(rng.randrange(36, 72)):
        level = rng.choice(("INFO", "INFO", "INFO", "DEBUG", "WARN"))
        text = _sentence(rng, rng.randrange(5, 12))
        if n % 9 == 4:
            port = rng.choice(PORTS)
            text += f" host=db-{rng.randrange(9)} port={port} took {rng.randrange(900)}ms"
        lines.append(f"{n:04d} {level} {text}")
    if failing:
        lines.insert(rng.randrange(len(lines)), f"ERROR {rng.choice(ERRORS)} at {_path(rng)}")
    return "\n".join(lines)


def _answer(rng: random.Random, turn: int) -> str:
    if turn % CJK_EVERY == 0 and rng.random() < 0.5:
        return rng.choice(CHINESE_ANSWERS) + " " + _sentence(rng, 12)
    text = " ".join(_sentence(rng, rng.randrange(10, 22)) for _ in range(rng.randrange(5, 12)))
    if rng.random() < 0.15:
        text += f" The {rng.choice(ERRORS).split(':')[0]} is fixed in {_path(rng)}."
    return text


def message(i: int) -> Message:
    """The `i`-th message (from 0) of the conversation; its tool result follows its call."""
    turn, step = divmod(i, 4)
    rng = random.Random(i)
    if step == 0:
        return Message(role="user", content=_user(rng, turn))
    if step == 1:
        text, call = _call(random.Random(turn), turn)
        return Message(role="assistant", content=text, tool_calls=(call,))
    if step == 2:
        return Message(role="tool", tool_call_id=f"call_{turn:09d}", content=_output(rng, turn))
    return Message(role="assistant", content=_answer(rng, turn))


def messages(start: int, stop: int) -> Iterator[Message]:
    """Messages `start` to `stop` (exclusive)."""
    return (message(i) for i in range(start, stop))
