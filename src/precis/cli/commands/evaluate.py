"""`precis eval`: replay conversations under each compaction strategy and compare what survives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from precis.cli.errors import CliFailure, CliUsageError


def _strategy_name(name: str) -> str:
    """A known strategy's name; the library's own lookup rejects others, and typer reports it."""
    from precis.eval import strategy

    return strategy(name).name


def eval_command(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Conversations (shared trajectory JSONL).")
    ] = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy", "-s", parser=_strategy_name, help="Repeat to pick; default all."
        ),
    ] = None,
    window: Annotated[int, typer.Option(min=1, help="Context window to replay at.")] = 8000,
    at: Annotated[
        int | None, typer.Option(min=1, help="Compact once, after the first K messages.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(help="Write the window's composition per strategy as SVG (FILE.svg)."),
    ] = None,
    reference: Annotated[
        bool, typer.Option("--reference", help="Compare with Claude Code's own summaries.")
    ] = False,
    trajectories: Annotated[
        Path | None,
        typer.Option(help="Folder with reference_summaries/ and its conversations (--reference)."),
    ] = None,
) -> None:
    """Replay conversations per strategy: violations, tokens, calls, time, fact retention."""
    from rich.console import Console

    import precis.eval as evaluation

    if reference:
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
            Console(width=160).print(evaluation.render_reference(ref))
        return
    if not files:
        raise CliUsageError("name the conversations to replay, or pass --reference")
    if plot is not None and plot.suffix.lower() != ".svg":
        raise CliUsageError(f"--plot {str(plot)!r}: the plot is SVG; name a .svg file")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise CliFailure(f"no such file: {', '.join(missing)}")
    report = evaluation.run_eval(
        files,
        strategies=strategy or evaluation.STRATEGY_NAMES,
        window=window,
        at=at,
    )
    if plot is not None:
        evaluation.plot_composition(report, plot)
    if as_json:
        print(json.dumps(evaluation.report_json(report), ensure_ascii=False))
    else:
        Console(width=160).print(evaluation.render_table(report))
