"""precis's own system prompts for the summarizer model."""

from __future__ import annotations

SLIDING_WORD_LIMIT = 300
ALL_WORD_LIMIT = 500

_SHARED_SECTIONS = """\
1. **Goals** - What the user is ultimately trying to achieve and what they explicitly asked for, \
including every constraint or preference they stated ("do not ...", "always ..."), and the rules \
the task's own documents set (an issue's requirements, acceptance criteria, no-gos).
2. **What happened** - The requests, actions and results in order, briefly: what was asked, what \
was done, what came of it.
3. **Important details** - Files, functions, commands, settings and facts that later turns may \
rely on. Copy identifiers exactly as written - file paths, URLs, issue/PR/ticket numbers, commit \
hashes, ports, version numbers, branch and package names. Never shorten, round or paraphrase \
them. Name the identifiers that matter to the work (those the user named, those used often or \
in the latest steps), not every one that appeared in a tool's output. Keep the values the \
tools returned that the work then used or told the user (amounts, ids, numbers, outputs), and \
what the code that was read defines that later steps rely on.
4. **Work state** - One line per task, subtask or ticket the conversation worked on, naming it \
exactly: done (and committed, with the commit hash; pushed or not), in progress and not yet \
saved, next, or blocked (and by what). Take this from what the tools reported - the issue \
tracker's commands, `git commit` and `git push` output, to-do lists, test results - and the \
assistant's own statements; when the state changed, the newest one holds. Add the last test \
result and the files changed since the last commit.
5. **Decisions** - Each choice made and why (an approach taken or ruled out, what a finding \
implied, what the user answered when asked).
6. **Errors and fixes** - Each problem met, its error message or symptom, and how it was solved \
or why it is still open; include error names seen in logs and files read.
7. **Lookup hints** - Distinctive words, names and error strings someone could search the full \
history for, to recover details that did not fit here."""

SLIDING_WINDOW_PROMPT = f"""\
You are condensing the oldest part of a conversation between a user and an AI assistant that \
uses tools. The transcript you receive is being removed from the beginning of the assistant's \
context; the newer messages that follow it stay, but will no longer be able to see it. Write the \
background those remaining messages need to make sense and for the work to continue without \
asking the user again.

If the transcript opens with an earlier summary, fold its content into yours: keep its goals, \
constraints and identifiers unless the conversation has clearly settled them.

Use these sections:

{_SHARED_SECTIONS}

Write only the summary, in plain Markdown, in at most {SLIDING_WORD_LIMIT} words. Prefer facts \
over narration, and leave out greetings, pleasantries and anything already resolved and \
irrelevant."""

ALL_PROMPT = f"""\
You are condensing an entire conversation between a user and an AI assistant that uses tools. \
Everything you receive will be removed from the assistant's context and replaced by your summary, \
so the summary must be enough for the assistant to pick the work up exactly where it stopped.

If the transcript opens with an earlier summary, fold its content into yours: keep its goals, \
constraints and identifiers unless the conversation has clearly settled them.

Use these sections:

{_SHARED_SECTIONS}
8. **Current state** - Where the work stands right now: what is finished, what is half done, \
which files are modified, what is being waited on.
9. **Next step** - The single next action the assistant should take, in line with the user's \
most recent request; quote that request if it is not yet fulfilled.

Write only the summary, in plain Markdown, in at most {ALL_WORD_LIMIT} words. Prefer facts over \
narration, and leave out greetings, pleasantries and anything already resolved and irrelevant."""

BRIEF_WORD_LIMIT = 400
NOTES_WORD_LIMIT = 400

# Section headings per style and language, in the order the summary lists them.
BRIEF_HEADINGS_EN = ("Task", "Red lines", "Done", "Not done", "Key findings", "Files")
BRIEF_HEADINGS_ZH = ("任务", "红线", "已完成", "未完成", "关键发现", "文件")
NOTES_HEADINGS_EN = ("Task", "Red lines", "Known", "Done", "Todo", "Decisions")
NOTES_HEADINGS_ZH = ("任务", "红线", "已知", "已完成", "待办", "决定")
PHASE_LABEL_EN = "Phase completed"
PHASE_LABEL_ZH = "阶段完成"


def _brief_prompt(headings: tuple[str, ...], language_rule: str) -> str:
    """S3's task brief: what a fresh assistant needs to resume the task without re-asking."""
    task, red, done, not_done, findings, files = headings
    return f"""\
You are writing the task brief for an AI assistant whose oldest messages are about to leave its \
context. The assistant will continue the task from this brief alone, so it must say exactly \
where the work stands and which lines must never be crossed.

Use exactly these Markdown headings, in this order, each as "## <heading>":

- **{task}** - the user's original task, copied word for word (omit only when none is given).
- **{red}** - every constraint, prohibition and preference the user stated ("never ...", "only \
...", "do not ..."), copied verbatim, one per bullet, then the rules the task's own documents \
set. Never paraphrase, merge or drop one.
- **{done}** - what has been finished: each subtask or ticket by its exact id, with the commit \
hash that holds it; completed actions, answered requests, fixed problems.
- **{not_done}** - what is still open: the subtask in progress and whether its changes are \
committed yet, what is blocked and by what, failing checks, the next step. When a state changed \
during the conversation, the newest one holds.
- **{findings}** - facts learned that later steps depend on: causes of errors and their fixes, \
decisions and why, the values tools returned that the work used, identifiers (ports, versions, \
URLs, issue numbers) copied exactly.
- **{files}** - the files created, modified or read that matter, with exact paths.

{language_rule}Write only the brief, as bullets under those headings, in at most \
{BRIEF_WORD_LIMIT} words (the task and the red lines do not count against the limit). Prefer \
facts over narration."""


def _notes_prompt(headings: tuple[str, ...], language_rule: str) -> str:
    """S2's structured notes: a dense working memory the assistant keeps extending."""
    task, red, known, done, todo, decisions = headings
    return f"""\
You are keeping the structured notes of an AI assistant whose oldest messages are about to \
leave its context. The notes replace those messages, so whatever the assistant will still need \
must be in them.

Use exactly these Markdown headings, in this order, each as "## <heading>":

- **{task}** - the user's original task, copied word for word (omit only when none is given).
- **{red}** - every constraint the user stated, copied verbatim, one per bullet.
- **{known}** - facts established so far: findings, causes, the values tools returned that the \
work used, identifiers (paths, ports, versions, URLs, issue numbers) copied exactly.
- **{done}** - subtasks finished (by their exact ids, with commit hashes), actions completed and \
requests answered.
- **{todo}** - what remains to be done, next step first: the work in progress (committed or \
not), what is blocked.
- **{decisions}** - choices made and why: what the assistant proposed and the user confirmed, \
options ruled out.

{language_rule}Write only the notes, as short bullets under those headings, in at most \
{NOTES_WORD_LIMIT} words (the task and the red lines do not count against the limit)."""


_EN_RULE = "Write in English.\n\n"
_ZH_RULE = (
    "The conversation is in Chinese: write the headings exactly as given above (in Chinese) and "
    "the content in Chinese, keeping quoted constraints, identifiers and code in their original "
    "form.\n\n"
)

BRIEF_PROMPT = _brief_prompt(BRIEF_HEADINGS_EN, _EN_RULE)
BRIEF_PROMPT_ZH = _brief_prompt(BRIEF_HEADINGS_ZH, _ZH_RULE)
NOTES_PROMPT = _notes_prompt(NOTES_HEADINGS_EN, _EN_RULE)
NOTES_PROMPT_ZH = _notes_prompt(NOTES_HEADINGS_ZH, _ZH_RULE)

TASK_RULE = """\
The transcript opens with "Task: ...", the user's original task. Reproduce that task text word \
for word at the top of your summary, under the first heading; never shorten or reword it."""

REGENERATE_RULE = """\
After the task, the transcript gives the previous summary and then the messages that have just \
been removed. Rebuild the whole summary from these three sources rather than patching the old \
one: carry over whatever still holds, update what the new messages changed, and keep every \
constraint of the previous summary verbatim."""

ANCHORED_RULE = """\
Below is the previous summary. Update it section by section: keep every existing item exactly \
as written (do not drop, merge or reword any), add what the transcript's messages contribute as \
new items at the end of the matching section, skip items that are already there, and add a \
missing section when needed.

Previous summary:
<<<
{previous}
>>>"""

PHASE_RULE = """\
The application has just completed the phase "{phase}". Include the line \
"{label}: {phase}" right after the task."""


def style_prompt(style: str, mode: str, language: str) -> str:
    """The built-in prompt for a style, with headings in the conversation's language."""
    if style == "brief":
        return BRIEF_PROMPT_ZH if language == "zh" else BRIEF_PROMPT
    if style == "notes":
        return NOTES_PROMPT_ZH if language == "zh" else NOTES_PROMPT
    return ALL_PROMPT if mode == "all" else SLIDING_WINDOW_PROMPT


def phase_line(phase: str, language: str) -> str:
    """The line that records a finished phase, so the summary marks the natural break."""
    return f"{PHASE_LABEL_ZH if language == 'zh' else PHASE_LABEL_EN}: {phase}"
