"""`precis eval`: replay conversations under each compaction strategy and compare what survives.

Three ways in: conversations replayed per strategy and window (the budget table after them);
`--facts`, hand-made fact sets judging each strategy's summary at their points (with `--probes`
a model answers their questions from it); `--reference`, a self-check with precis's own
extractor beside Claude Code's summaries.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from precis.cli.config import make_provider
from precis.cli.errors import CliFailure, CliUsageError

if TYPE_CHECKING:
    from rich.console import Console

    from precis.providers.base import ChatProvider

WIDTH = 160


def _strategy_name(name: str) -> str:
    """A strategy a replay or the judge knows; the library's lookup words the refusal."""
    from precis.eval import JUDGE_STRATEGIES, strategy

    return name if name in JUDGE_STRATEGIES else strategy(name).name


def _console() -> Console:
    from rich.console import Console

    return Console(width=WIDTH)


def eval_command(
    ctx: typer.Context,
    files: Annotated[
        list[Path] | None, typer.Argument(help="Conversations (shared trajectory JSONL).")
    ] = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy", "-s", parser=_strategy_name, help="Repeat to pick; default all."
        ),
    ] = None,
    window: Annotated[
        list[int] | None,
        typer.Option(min=1, help="Context window to replay at; repeat for several (8000)."),
    ] = None,
    at: Annotated[
        int | None, typer.Option(min=1, help="Compact once, after the first K messages.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write the window's composition per strategy as SVG (FILE.svg)."),
    ] = None,
    facts: Annotated[
        Path | None,
        typer.Option(help="Judge with hand-made fact sets: a fact-set file or a folder of them."),
    ] = None,
    probes: Annotated[
        bool,
        typer.Option(
            "--probes", help="With --facts: ask the sets' questions of --provider's model."
        ),
    ] = False,
    reference: Annotated[
        bool,
        typer.Option(
            "--reference", help="Self-check: precis's own extractor beside Claude Code's."
        ),
    ] = False,
    trajectories: Annotated[
        Path | None,
        typer.Option(
            help="Folder of the conversations and reference_summaries/ (--reference, --facts)."
        ),
    ] = None,
) -> None:
    """Replay conversations per strategy and window, or judge summaries by hand-made facts."""
    if probes and facts is None:
        raise CliUsageError("--probes needs --facts FILE|DIR, the fact sets holding the questions")
    if facts is not None:
        _judge(ctx, facts, strategy, trajectories, probes, as_json)
        return
    if reference:
        _self_check(trajectories, as_json)
        return
    _replay(files, strategy, window or [8000], at, plot, as_json)


def _replay(
    files: list[Path] | None,
    strategy: list[str] | None,
    windows: list[int],
    at: int | None,
    plot: Path | None,
    as_json: bool,
) -> None:
    """Each window's replay; one window also prints its per-run table, every run the budget."""
    import precis.eval as evaluation

    if not files:
        raise CliUsageError("name the conversations to replay, or pass --facts or --reference")
    if plot is not None and plot.suffix.lower() != ".svg":
        raise CliUsageError(f"--plot {str(plot)!r}: the plot is SVG; name a .svg file")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CliFailure(f"no such file: {', '.join(missing)}")
    judged = [s for s in strategy or () if s not in evaluation.STRATEGY_NAMES]
    if judged:
        raise CliUsageError(f"strategy {judged[0]!r} is the judge's; use it with --facts")
    reports = [
        evaluation.run_eval(
            files, strategies=strategy or evaluation.STRATEGY_NAMES, window=w, at=at
        )
        for w in dict.fromkeys(windows)
    ]
    if plot is not None:
        evaluation.plot_composition(reports[0], plot)
    cells = evaluation.budget_cells(reports)
    if as_json:
        data: dict[str, Any] = (
            evaluation.report_json(reports[0])
            if len(reports) == 1
            else {"windows": [evaluation.report_json(r) for r in reports]}
        )
        data["budget"] = evaluation.budget_json(cells)
        data["policy"] = evaluation.policy_json(evaluation.policy_cells(reports))
        print(json.dumps(data, ensure_ascii=False))
        return
    console = _console()
    if len(reports) == 1:
        console.print(evaluation.render_table(reports[0]))
    if cells:
        console.print(evaluation.render_budget(cells))
        console.print(evaluation.render_policy(evaluation.policy_cells(reports)))


def _self_check(trajectories: Path | None, as_json: bool) -> None:
    import precis.eval as evaluation

    if trajectories is None:
        raise CliUsageError(
            "--reference needs --trajectories DIR, the folder holding reference_summaries/"
        )
    if not (trajectories / "reference_summaries").is_dir():
        raise CliUsageError(f"{trajectories}: no reference_summaries/ folder")
    ref = evaluation.run_reference(trajectories)
    if as_json:
        print(json.dumps(evaluation.reference_json(ref), ensure_ascii=False))
    else:
        _console().print(evaluation.render_reference(ref))


def _judge(
    ctx: typer.Context,
    facts: Path,
    strategy: list[str] | None,
    trajectories: Path | None,
    probes: bool,
    as_json: bool,
) -> None:
    """Judge each strategy's text at every point of the fact sets; `llm` and the probes use the
    global --provider (an llm strategy runs when one other than mock is given)."""
    import precis.eval as evaluation

    sets = evaluation.load_fact_sets(facts)
    folder = trajectories or _beside(facts)
    if not folder.is_dir():
        raise CliUsageError(
            f"{folder}: no such folder of conversations; name it with --trajectories DIR"
        )
    config = ctx.obj
    named = config.provider != "mock"
    chosen = strategy or [s for s in evaluation.JUDGE_STRATEGIES if s != "llm" or named]
    replayed = [s for s in chosen if s not in evaluation.JUDGE_STRATEGIES]
    if replayed:
        raise CliUsageError(
            f"strategy {replayed[0]!r} is a replay's; with --facts choose from "
            + ", ".join(evaluation.JUDGE_STRATEGIES)
        )
    if probes and not named:
        raise CliUsageError(
            "--probes needs a model to ask: give --provider openai (with --model and "
            "--base-url for a local server) or --provider llama"
        )
    provider: ChatProvider | None = None
    if probes or "llm" in chosen:
        provider = make_provider(config)
    report = evaluation.run_judge(
        sets,
        evaluation.JudgeRun(folder, tuple(dict.fromkeys(chosen)), provider, probes),
    )
    if as_json:
        print(json.dumps(evaluation.judge_json(report), ensure_ascii=False))
        return
    _console().print(evaluation.render_judge(report))
    for line in evaluation.judge_notes(report):
        print(f"precis: note: {line}", file=sys.stderr)


def _beside(facts: Path) -> Path:
    """Where conversations are by default: `trajectories/` beside the fact sets' folder."""
    folder = facts if facts.is_dir() else facts.parent
    return folder.parent / "trajectories"
