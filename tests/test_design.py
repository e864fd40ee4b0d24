"""docs/design.md is the contract, kept true by the tests that name its rules.

Each normative sentence of the design ends in a tag such as ``[R:append-fenced]``; a test that
checks that rule carries ``@pytest.mark.rule("append-fenced")``. Every rule has a test, every
rule a test names is in the design, and the README links the design.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DESIGN = REPO / "docs" / "design.md"
TESTS = REPO / "tests"
# a tag in backticks is an example of one (the design says how tags work), not a rule
TAG = re.compile(r"(?<!`)\[R:([^\]]*)\](?!`)")
NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def design_rules() -> list[str]:
    """Every rule tag in the design, in order, repeats included."""
    return TAG.findall(DESIGN.read_text(encoding="utf-8"))


def _rule_marks(decorators: list[ast.expr]) -> list[ast.Call]:
    """The ``pytest.mark.rule(...)`` calls among ``decorators`` (or a ``pytestmark`` value)."""
    return [d for d in decorators if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.rule"]


def _marks_of(tree: ast.Module) -> list[ast.Call]:
    found: list[ast.Call] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
            found += _rule_marks(node.decorator_list)
        elif isinstance(node, ast.Assign) and any(ast.unparse(t) == "pytestmark" for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            found += _rule_marks(values)
    return found


def named_rules() -> dict[str, list[str]]:
    """Rule name -> the tests (file::function or file) that name it."""
    named: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for mark in _marks_of(tree):
            where = f"{path.relative_to(REPO)}:{mark.lineno}"
            assert mark.args and not mark.keywords, f"{where}: name at least one rule, as plain strings"
            for arg in mark.args:
                assert isinstance(arg, ast.Constant) and isinstance(arg.value, str), f"{where}: a rule is a string"
                named.setdefault(arg.value, []).append(where)
    return named


def test_each_rule_is_tagged_once_with_a_short_stable_name() -> None:
    rules = design_rules()
    assert len(rules) >= 20, "the design's rules carry [R:name] tags"
    assert [r for r, n in Counter(rules).items() if n > 1] == [], "a rule is stated in one place"
    assert [r for r in rules if not NAME.fullmatch(r)] == [], "names are lower-case words joined by '-'"


def test_every_rule_in_the_design_is_named_by_a_test() -> None:
    untested = sorted(set(design_rules()) - named_rules().keys())
    assert untested == [], f"rules of docs/design.md that no test names with @pytest.mark.rule: {untested}"


def test_every_rule_a_test_names_is_in_the_design() -> None:
    unknown = {rule: where for rule, where in named_rules().items() if rule not in set(design_rules())}
    assert unknown == {}, f"tests name rules that docs/design.md does not tag: {unknown}"


def test_the_readme_links_the_design_in_the_repository() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "](docs/design.md)" in readme
    assert "../shared" not in readme, "the contract lives in the repository, not beside it"
