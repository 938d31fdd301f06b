"""ECMA-262 ``u``-mode patterns and strings whose answers a JavaScript engine recorded.

``tests/ecma262_answers.json`` holds, for every pattern below, either ``null`` (the engine
refuses it: SyntaxError) or one character per string, ``1`` when
``new RegExp(pattern, "u").test(string)`` is true, else ``0``. Regenerate it with
``python tests/ecma_cases.py`` where ``node`` is on the PATH; ``test_ecmaregex.py`` checks
the translation against the recorded answers (and against a live engine when there is one).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

ANSWERS = pathlib.Path(__file__).with_name("ecma262_answers.json")

PATTERNS = [
    "^[a-z]+$", r"^\d+$", r"^\w+$", r"^\s+$", r"^\S+$", r"^\D+$", r"^\W+$", "abc", "^abc",
    "abc$", "^$", "^", "$", ".", "^.$", "^..$", "a.c", r"\bfoo\b", r"\Bo", r"\bé", r"é\b",
    "^[^a]$", "[^]", "[]", "^[]$", r"[\d-]", r"[-\w]", r"[\s\S]", r"[^\s]", r"[\b]", r"\cJ",
    r"\cj", r"\0", r"\x41", r"\u0041", r"\u{1F600}", r"^\u{1F600}$", r"\uD83D\uDE00",
    r"^\uD83D\uDE00$", r"\p{L}", r"^\p{Lu}+$", r"\P{L}", r"\p{Letter}", r"\p{gc=Nd}",
    r"\p{General_Category=Zs}", r"^\p{N}+$", "a{2}", "a{2,}", "a{2,3}", "^a{2,3}$", "a{,2}",
    "a{", "a{2", "}", "]", "{", "a**", "a++", "a*?", "a+?b", "(a|b)c", "(?:a|b)+$", "(?<n>a)b",
    r"(?<n>a)\k<n>", r"(a)\1", r"\1(a)", "(?=a)", "(?=a)a", "(?!a).", "(?<=a)b", "(?<!a)b",
    "(?<=a+)b", "(?=a)*", "(?i)a", "(?i:a)b", r"\z", r"\Z", r"\A", r"\e", r"\h", r"\-", r"[\-]",
    r"\/", "/", r"\.", r"[.]", r"[\d-x]", "[z-a]", "[[:alpha:]]", r"[\w-]", r"\u{110000}",
    r"\x4", r"\u004", r"\08", r"\c1", "a|", "|", "()", "(", ")", "a)", r"^[A-Z0-9_]+$",
    r"^[a-zA-Z0-9_-]{1,64}$", r"^\d{4}-\d{2}-\d{2}$", r"^[^@\s]+@[^@\s]+\.[^@\s]+$",
    r"^https?://", r"^(?!\s)(?!.*\s$).+$", r"^[\u0041-\u005A]+$", r"\t", r"\v", r"\f",
    "^\n$", r"^\n$", r"^\r?\n$", "\u00e9", "^\u00e9$", r"[\u{1F600}-\u{1F64F}]", r"\$", r"\^",
]  # fmt: skip

STRINGS = [
    "", "a", "abc", "abc\n", "\nabc", "ABC", "abc1", "123", "123\n", "\u0661\u0662\u0663",
    "\uff11", "_", "\u00e9", "caf\u00e9", "\u00e9a", "foo", "a foo b", "foo\u00e9", " ",
    "\t", "\u00a0", "\ufeff", "\u0085", "\u2028", "\u2029", "\u1680", "\u180e", "\u200b",
    "\u3000", "\x1c", "\r", "\n", "a\nc", "a\rc", "a\u2028c", "axc", "\U0001f600",
    "\U0001f600\U0001f600", "\x00", "A", "\x08", "aa", "aaa", "aaaa", "a{,2}", "}", "{", "]",
    "ab", "bb", "cb", "ac", "bc", "x-1", "-", ".", "/", "$", "^", "zz", "a@b.c", "a @b.c",
    "2024-01-31", "2024-01-31\n", "https://x", " lead", "trail ", "ok text", "\u01c5",
    "\u2167", "\u0301", "\x0b", "\x0c", "\r\n", "[", ":", "p", "e", "h", "z", "Z",
]  # fmt: skip

_SCRIPT = """
const {patterns, strings} = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const out = patterns.map(p => {
  let re;
  try { re = new RegExp(p, 'u'); } catch (e) { return null; }
  return strings.map(s => re.test(s) ? '1' : '0').join('');
});
process.stdout.write(JSON.stringify(out));
"""


def ask_engine(patterns: list[str], strings: list[str]) -> list[str | None] | None:
    """The engine's answers, or None when no JavaScript engine is on the PATH."""
    node = shutil.which("node")
    if node is None:
        return None
    done = subprocess.run(
        [node, "-e", _SCRIPT],
        input=json.dumps({"patterns": patterns, "strings": strings}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answers: list[str | None] = json.loads(done.stdout)
    return answers


def main() -> int:
    answers = ask_engine(PATTERNS, STRINGS)
    if answers is None:
        print("no JavaScript engine (node) on the PATH", file=sys.stderr)
        return 1
    table = dict(zip(PATTERNS, answers, strict=True))
    ANSWERS.write_text(json.dumps({"strings": STRINGS, "answers": table}, indent=0) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
