"""The README's examples are what precis really prints and answers."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from precis.cli import app
from precis.cli.config import DEFAULT_CONTEXT_WINDOW
from precis.engine.settings import CompactionSettings
from precis.server import create_app
from precis.stores import MemoryStore

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_readme_compaction_line_is_one_the_demo_prints() -> None:
    shown = re.findall(r"⇣ compacted \([^`]*", README)
    assert shown, "the README shows no compaction line"
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    printed = [line for line in result.output.splitlines() if line.startswith("⇣ compacted")]
    for line in shown:
        assert line in printed, f"README shows {line!r}; the demo prints {printed}"


def _curl_bodies() -> tuple[dict[str, str], str, str, str]:
    """The service example's requests, read from the README itself."""
    block = README[README.index("export PRECIS_API_KEY") :]
    block = block[: block.index("```")]
    create = re.search(r"-d '(\{\"id\".*?\})'", block)
    first = re.search(r"/messages -H \"\$H\" -H \"\$J\" -d '(\{\"messages\".*?\]\})'", block, re.S)
    step = re.search(
        r"-d '(\{\"messages\": \[\{\"role\": \"user\", \"content\": \"Step .*?\]\})'", block, re.S
    )
    assert create and first and step, "the README's service example changed shape"
    return {"create": create.group(1)}, first.group(1), step.group(1), block


def test_the_readme_service_example_compacts_as_it_says() -> None:
    bodies, first, step, block = _curl_bodies()
    rounds = re.search(r"for n in ([\d ]+); do", block)
    claim = re.search(r"stats \((\d+) → (\d+) messages here\)", README)
    assert rounds and claim
    app_ = create_app(
        MemoryStore(), settings=CompactionSettings(context_window=DEFAULT_CONTEXT_WINDOW)
    )
    base = "/v1/conversations"
    headers = {"Content-Type": "application/json"}
    with TestClient(app_) as client:
        assert client.post(base, content=bodies["create"], headers=headers).status_code == 201
        assert client.post(f"{base}/agent-1/messages", content=first, headers=headers).is_success
        for n in rounds.group(1).split():
            # The shell closes the quote around $n and opens it again: the body holds n itself.
            body = step.replace("'$n'", n)
            assert client.post(f"{base}/agent-1/messages", content=body, headers=headers).is_success
        compacted = client.post(f"{base}/agent-1/compact", content="{}", headers=headers)
        assert compacted.status_code == 200, compacted.text
        stats = compacted.json()["stats"]
        assert (stats["messages_count_before"], stats["messages_count_after"]) == (
            int(claim.group(1)),
            int(claim.group(2)),
        )
        # "recall still finds the original messages about port 5433": the user's and the reply.
        hits = client.get(f"{base}/agent-1/recall", params={"q": "5433"}).json()["hits"]
        originals = {hit["role"] for hit in hits if "5433" in hit["snippet"]}
        assert {"user", "assistant"} <= originals
