"""Which sentences state a rule: a prohibition or an obligation set for the work, in English or
Chinese, told apart from lines that only carry the words (code, file listings, tool schemas,
logs, docstrings, questions, reports of what code does).

Every pattern is a flat alternation or bounded repeat, and a sentence over `MAX_RULE_CHARS` is
no rule, so a scan is linear in the text whatever it holds (`tests/test_constraint_corpus.py`).
"""

from __future__ import annotations

import re
from typing import Final

from precis.core.memo import CALL_ENTRIES, Bounded
from precis.facts.patterns import (
    CODE_BLOCK_RE,
    NUMBERED_LINE_RE,
    SELF_REPORT_RE,
    SENTENCE_SPLIT_RE,
)

# A rule is a sentence; a longer "sentence" is a paragraph without stops, or data.
MAX_RULE_CHARS: Final = 600

# How a line opens that holds code, a schema, a docstring or a log, not anyone's words. The
# indent is taken whole (`\s*+`): given back a space at a time, each option that may open on
# spaces of its own would rescan the rest, quadratic on a line of blanks, and none needs it back.
_NOT_PROSE_START_RE: Final = re.compile(
    r"\s*+(?:"
    # code and its comments
    r"raise \w|assert \w|return\b|def \w|class \w+[(:]|throw new|(?:const|let|var) \w+ =|"
    r"export (?:type|const|default|function)|import \w|from [\w.]+ import|"
    r"if \(|if [^\n]{0,80}:\s*$|"
    r"SELECT |INSERT |UPDATE \w+ SET|DELETE FROM|(?:log|logger|console|print)[.(]"
    r"|#(?![#\d])|//|/\*|\*/|\*\s*@|@\w|:(?:param|raises?|returns?|type|rtype)\b|>>>"
    # a tool's parameter, a command's flag, a usage line, a JSON key
    r"|[-*]?\s*`?[\w.]+`?\s*[(（](?:string|integer|number|boolean|array|object|bool|int|str|"
    r"float|字符串|数字|布尔|整数|数组|对象)"
    r"|-{1,2}[A-Za-z]|(?:usage|用法)\s*[:：]|\"[\w-]+\"\s*:"
    # logs and error messages
    r"|(?:ERROR|FATAL|INFO|DEBUG|WARN|error|warning|fatal|hint|note)(?!\w{0,4}\s?[:：]\s?"
    r"(?:please )?(?:do not|don['’]t|never|always|only|avoid|make sure)\b)|sudo|npm (?:ERR!|WARN)|"
    r"E\s{2}|Permission denied|permission denied|Traceback|File \"|Invalid\b|Error:|"
    r"\d{3} [A-Z]|\d{4}-\d\d-\d\d|\[[A-Z]+\]|[A-Z]+_[A-Z_]+:|[\w.]*(?:Error|Exception|Warning):|"
    r"error\[|[\w ]{0,6}(?:报错|错误|警告|提示|致命错误|日志)[^，。：:]{0,4}[:：])"
    # an indented "name: …" under Args: / 参数：
    r"|\s{2}\s*[\w.]+\s*[:：]\s"
)
# What marks code anywhere in a line: a docstring, a call's format, an assignment, a block.
_CODE_MARK_RE: Final = re.compile(
    r"\"\"\"|/\*\*|\*/|\.format\(|=>|[;{(]\s*$|[\w)\]]\s?(?:==|!=|=)\s?[\w\"'{\[(]"
)
# Quoted text and inline code: what was said or shown, not a rule the speaker sets.
_QUOTED_RE: Final = re.compile(
    r"`[^`\n]{0,300}`|\"[^\"\n]{0,300}\"|“[^”\n]{0,300}”|「[^」\n]{0,300}」"
)

# Where a clause starts, and the words that may come before its verb.
_START: Final = (
    r"(?:^|[,;:(—–，；：]\s?|\s[-–]\s|\b(?:and|but|so|then|also)\s)"
    r"(?:(?:please|pls|just|also|kindly|absolutely|so|and|but|then|really|try to|again)\s){0,3}"
)
# Verbs a rule may open with when it restricts (with `_RESTRICTION`).
_IMPERATIVE: Final = (
    r"(?:use|edit|change|touch|run|re-?run|verify|check|issue|include|work|deploy|write|install|test|commit|push|call|reply|answer|"
    r"modify|target|go with|return|store|read|import|pin|format|name|put|send|create|delete|"
    r"remove|fix|merge|rebase|log|print|update|document|release|build|add|make|keep|leave)"
)
_RESTRICTION: Final = (
    r"(?:\bonly\b|\bnothing but\b|[,;]\s?not\b|\binstead of\b|\brather than\b|\bevery time\b|"
    r"\bbefore (?:each|every|any)\b|\bat all times\b|\bfrom now on\b|\bunchanged\b|\balone\b|"
    r"\bas (?:it|they) (?:is|are)\b|\bintact\b|\buntouched\b|\bexclusively\b|"
    r"\band nothing (?:else|newer|older)\b|\bno matter what\b|\bto (?:make sure|ensure)\b|"
    r"\bwithout any other\b)"
)
# A clause that opens with a rule, or an imperative that restricts.
_RULE_EN_RE: Final = re.compile(
    # a clause that opens with a rule word: "never …", "don't …", "only use …", "avoid …"
    r"(?i:" + _START + r"(?:never|don['’]?t|do not|must(?: not| never)?|mustn['’]t|avoid|always|"
    r"only (?!(?:one|two|three|four|five|a few|some|half|\d))|make sure|make no|ensure|be sure|"
    r"remember\b(?!,? that)|please note|double-check|refrain|steer clear|stay away|keep away|"
    r"hands off|stop \w+ing|quit \w+ing|no more|under no circumstances|at no point|in no case|"
    r"prefer|stick (?:to|with)|limit yourself|whenever|from now on|"
    r"ask (?:me )?(?:first|before)|check with me|"
    r"wait for (?:my|an?) |keep (?!going|it up|me posted|up\b)|leave [^.!?]{1,40}? (?:alone|as)|"
    r"nothing (?:gets|is|may|should)|(?:nobody|no one) (?!has\b)\w+s\b|"
    r"no (?!(?:such|need|idea|problem|worries|rush|luck|way|doubt|matter)\b)[\w-]))"
    # an imperative that restricts: "use A, not B", "deploy to staging only"
    r"|(?i:" + _START + _IMPERATIVE + r"\b)(?:[^.!?]|\.(?=\d)){0,200}?(?i:" + _RESTRICTION + r")"
    # a house rule: "we use A here, not B"
    r"|(?i:\bwe use\b[^.!?]{0,80}?(?:[,;]\s?not\b|\binstead of\b|\brather than\b))"
)
_RULE_MODAL_RE: Final = re.compile(
    # who must or may not: "X must not …", "you can't …", "tests are required …"
    r"(?i:\b(?:must(?: not| never)?|mustn['’]t|shall not|should never|should not|shouldn['’]t|"
    r"should always|may not|has to|have to|needs to be|(?:is|are) (?:required|mandatory|a must)|"
    r"(?:is|are) (?:strictly )?(?:forbidden|prohibited|banned|not allowed|not permitted|"
    r"off-limits|off limits|not persistent)|it['’]s forbidden|only allowed|"
    r"not (?:OK|okay|acceptable) to)\b)"
    r"|(?i:\byou (?:cannot|can['’]t|can never)\b)"
    r"|(?i:\bwe (?:never|always|don['’]t|do not) (?!\w+ed\b|know|have|see|mind|think))"
    r"|(?i:\bI (?:do not|don['’]t|never) want\b|\bI['’]d rather you\b|\b(?:we|I) recommend\b)"
)
# What makes a sentence's "must" or "only" a report, an explanation or a guess, not a rule.
_REPORTED_RE: Final = re.compile(
    r"(?i)\b(?:was|were|had|did|(?<!rather you )didn['’]t|failed|because|since|so that|"
    r"otherwise|which is why|that['’]s why|explains|I think|it seems|seems|apparently|say|says|"
    r"said|refers? to|must have (?:been|had|done|gone|seen|made|\w+ed)|must['’]ve|"
    r"must be (?:busy|tired|kidding|joking)|may not (?:be|work|have|matter))\b"
)
_RULE_ZH_RE: Final = re.compile(
    r"不要(?!紧)|(?<![特区分识类级性告辨差派个鉴])别(?![人的名处墅])|禁止|必须|只用|只能|只改|只跑|"
    r"只在|只通过|仅限|不能|务必|不许|不准|不得|严禁|切勿|请勿|一律|统一用|以后[^。]{0,6}都用|"
    r"一定要|总是(?:先|要|用)|记得|确保|避免|不可以|不允许|不应该|都要|保持[^。]{0,12}(?:不变|原样)|而不是"
)
_REPORTED_ZH_RE: Final = re.compile(
    r"说|要求|因为|由于|觉得|认为|好像|似乎|没写|是不是|要不要|讨论|最多|不能为空|"
    r"(?:出错|出现|报错|失败(?!的))|^(?:我|我们)[^，。]{0,8}(?:不能|只)"
)
_QUESTION_END_RE: Final = re.compile(r"[?？]\s*$|[吗呢]\s*[。]?$")
_CLOSERS: Final = ")]} \t\n"
# Words one of `_RULE_MODAL_RE`'s forms holds (lowercased), so most sentences skip it.
_MODAL_WORDS: Final = (
    "must",
    "shall",
    "should",
    "may not",
    "has to",
    "have to",
    "needs to",
    "required",
    "mandatory",
    "forbidden",
    "prohibited",
    "banned",
    "not allowed",
    "not permitted",
    "off",
    "persistent",
    "only allowed",
    "not ok",
    "acceptable",
    "you",
    "we ",
    "i ",
    "i'",
    "i’",
    "recommend",
)
# The characters without which a line holds none of `_CODE_MARK_RE`'s marks.
_CODE_CHARS: Final = ("=", '"""', "*", ".format(", ";", "{", "(")
# How a line ends that does not go on in the next one.
_WRAPS_RE: Final = re.compile(r"[.!?:;。！？：；]$")


def _clean(piece: str) -> str:
    return " ".join(piece.strip().lstrip("-*•>#").split())


def is_rule(sentence: str) -> bool:
    """Whether one sentence (of prose: not code, schema or log) sets a rule for the work."""
    if len(sentence) > MAX_RULE_CHARS:
        return False
    bare = _QUOTED_RE.sub(" ", sentence)
    if _sets_rule(bare):
        return True
    # "先说一件事：不要…", "Heads up: never …": what follows a lead-in is judged alone (once).
    _, colon, rest = bare.partition("：") if "：" in bare else bare.partition(": ")
    return bool(colon) and len(rest) >= 6 and _sets_rule(rest)


def _sets_rule(bare: str) -> bool:
    """`is_rule` of a sentence with its quotes taken out."""
    found = _rule_forms(bare)
    if found == (False, False, False):  # (most sentences: the rest is slower)
        return False
    if _QUESTION_END_RE.search(bare.rstrip(_CLOSERS)):
        return False
    told = SELF_REPORT_RE.sub(" ", bare)
    if told != bare:
        found = _rule_forms(told)
    opens, modal, chinese = found
    if opens or (modal and _REPORTED_RE.search(told) is None):
        return True
    return chinese and _REPORTED_ZH_RE.search(told) is None


def _modal(text: str) -> bool:
    """Whether `text` says who must or may not, looked for only where its words are."""
    low = text.lower()
    return any(word in low for word in _MODAL_WORDS) and _RULE_MODAL_RE.search(text) is not None


def _rule_forms(text: str) -> tuple[bool, bool, bool]:
    """Whether `text` holds a clause that opens with a rule, a modal rule, a Chinese rule."""
    return (
        _RULE_EN_RE.search(text) is not None,
        _modal(text),
        _RULE_ZH_RE.search(text) is not None,
    )


def _not_prose(line: str) -> bool:
    """Whether a line is a listing's, code's, a schema's or a log's rather than prose."""
    if NUMBERED_LINE_RE.match(line) or _NOT_PROSE_START_RE.match(line):
        return True
    return any(mark in line for mark in _CODE_CHARS) and _CODE_MARK_RE.search(line) is not None


def _prose_lines(text: str) -> list[str]:
    """The lines of prose in `text`, a sentence wrapped onto the next line joined back."""
    lines: list[str] = []
    wrapped = False  # whether the last line kept goes on in the next one
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or _not_prose(line):  # (a blank line holds no sentence, ends none)
            wrapped = False
            continue
        if wrapped and stripped[:1].islower():
            lines[-1] = f"{lines[-1]} {stripped}"
        else:
            lines.append(line)
        wrapped = bool(stripped) and _WRAPS_RE.search(stripped) is None
    return lines


def constraint_sentences(text: str) -> list[str]:
    """The sentences of `text` that state a rule (don't / never / must / 不要 …), verbatim."""
    found: list[str] = []
    judged: Bounded[str, bool] = Bounded(CALL_ENTRIES)  # a sentence met again: whether a rule
    if "```" in text:
        text = CODE_BLOCK_RE.sub("\n", text)  # an example's comments set no rule
    for line in _prose_lines(text):
        for piece in SENTENCE_SPLIT_RE.split(line):
            sentence = _clean(piece)
            if len(sentence) < 6:
                continue
            rule = judged.get(sentence)
            if rule is None:
                rule = judged.put(sentence, is_rule(sentence))
            if rule:
                found.append(sentence)
    return found
