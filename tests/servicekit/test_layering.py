"""The libraries' layering and the services' one shape, read from the source.

castlog touches Redis keys and nothing HTTP: it imports redis, msgspec and the standard library.
chunking (the splitter) imports the standard library alone; castlog does not import it. fanout (the
shared tail and its listeners) sits on castlog, and on servicekit for the SSE frame its items carry;
neither imports it. servicekit holds the services' HTTP and operations half (the one SSE writer
included): it may import castlog, never fanout, durablestreams or a service.
Each service is the same few files, and its ``__main__`` runs through ``servicekit.runner.main``; its app
state is the same few keys, all in ``context.py``. Modules import each other one way: no cycle
inside any package under libs/ and services/ (subpackages included), nor across them. intake is two rooms:
the claim path, and ``speech/``, which may import the claim side's public pieces and is imported
by ``app.py`` alone.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES = ("intake", "edge", "synth")
SHAPE = ("__main__.py", "config.py", "app.py", "context.py", "views.py", "metrics.py")


def imported(package: Path) -> dict[str, set[str]]:
    """Module file -> the top-level names of everything it imports (relative imports left out)."""
    out: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(REPO))] = names - {"__future__"}
    return out


def outside_stdlib(names: set[str]) -> set[str]:
    return {n for n in names if n not in sys.stdlib_module_names}


def test_castlog_imports_only_redis_msgspec_and_the_standard_library() -> None:
    modules = imported(REPO / "libs" / "castlog")
    assert {"redis", "msgspec"} <= set().union(*modules.values())  # the reading sees its imports
    for module, names in modules.items():
        assert outside_stdlib(names) <= {"redis", "msgspec", "castlog"}, module


def test_chunking_imports_only_the_standard_library_and_castlog_does_not_import_it() -> None:
    modules = imported(REPO / "libs" / "chunking")
    assert {"re"} <= set().union(*modules.values())  # the reading sees its imports
    for module, names in modules.items():
        assert outside_stdlib(names) <= {"chunking"}, module
    assert all("chunking" not in names for names in imported(REPO / "libs" / "castlog").values())


def test_fanout_sits_above_castlog_and_servicekit_which_never_import_it() -> None:
    modules = imported(REPO / "libs" / "fanout")
    assert {"castlog", "servicekit", "redis"} <= set().union(*modules.values())
    for module, names in modules.items():
        assert outside_stdlib(names) <= {"castlog", "servicekit", "fanout", "redis", "msgspec"}, module
    for below in ("castlog", "servicekit"):
        assert all("fanout" not in names for names in imported(REPO / "libs" / below).values()), below


def test_durablestreams_sits_above_castlog_and_servicekit_and_below_the_services() -> None:
    allowed = {"castlog", "servicekit", "durablestreams", "redis", "aiohttp"}
    modules = imported(REPO / "libs" / "durablestreams")
    assert {"castlog", "servicekit", "redis"} <= set().union(*modules.values())
    for module, names in modules.items():
        assert outside_stdlib(names) <= allowed, module


def test_servicekit_imports_castlog_and_its_http_tools_but_no_service() -> None:
    """Nor fanout or durablestreams, which sit on it."""
    allowed = {"castlog", "servicekit", "redis", "msgspec", "aiohttp", "prometheus_client"}
    for module, names in imported(REPO / "libs" / "servicekit").items():
        assert outside_stdlib(names) <= allowed, module


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_is_the_same_few_files_and_runs_through_servicekit(service: str) -> None:
    folder = REPO / "services" / service
    assert all((folder / name).is_file() for name in SHAPE), sorted(p.name for p in folder.glob("*.py"))
    main = (folder / "__main__.py").read_text(encoding="utf-8")
    assert f'main("{service}")' in main and "from servicekit.runner import main" in main
    assert not (folder / "appkeys.py").exists()


def app_keys(path: Path) -> dict[str, ast.expr | None]:
    """Module-level ``NAME = web.AppKey("...", T)`` of a file -> its ``T`` (None when not given)."""
    keys: dict[str, ast.expr | None] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Call) and ast.unparse(value.func) == "web.AppKey":
            keys[target.id] = value.args[1] if len(value.args) > 1 else None
    return keys


def dataclasses_of(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.name for node in tree.body if isinstance(node, ast.ClassDef)
            and any(ast.unparse(d).split("(")[0] in ("dataclass", "dataclasses.dataclass") for d in node.decorator_list)]


@pytest.mark.parametrize("service", SERVICES)
def test_each_service_keeps_config_metrics_and_one_state_dataclass_under_one_key(service: str) -> None:
    """edge's ``EDGE``, intake's ``INTAKE``, synth's ``SYNTH``: what every handler needs, set up once
    Redis is connected; ``CONFIG`` and ``METRICS`` beside it, nothing more."""
    folder = REPO / "services" / service
    state = service.capitalize()
    assert dataclasses_of(folder / "context.py") == [state]
    keys = app_keys(folder / "context.py")
    assert set(keys) == {"CONFIG", "METRICS", service.upper()}, sorted(keys)
    assert ast.unparse(keys[service.upper()]) == state  # type: ignore[arg-type]
    elsewhere = {p.name: sorted(app_keys(p)) for p in folder.rglob("*.py") if p.name != "context.py" and app_keys(p)}
    assert elsewhere == {}, "app keys belong in context.py"


def modules_of(roots: tuple[Path, ...] = (REPO / "libs", REPO / "services")) -> dict[str, Path]:
    """Dotted name -> file of every module in every package under ``roots`` (a package's
    ``__init__.py`` under the package's own name)."""
    out: dict[str, Path] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if all((root / Path(*parts[:k]) / "__init__.py").is_file() for k in range(1, len(parts))):
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                if name:
                    out[name] = path
    return out


def package_imports(folder: Path) -> dict[str, set[str]]:
    """Module name -> the modules of the same package it imports (relative or by the package's
    name, under ``TYPE_CHECKING`` too: a cycle kept for the type checker is still a cycle). A
    subpackage counts as one module."""
    package = folder.name
    modules = {p.stem for p in folder.glob("*.py")} | {p.parent.name for p in folder.glob("*/__init__.py")}
    out: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level == 1 or node.module == package):
                if node.module and node.level == 1:
                    names.add(node.module.split(".")[0])
                else:  # from . import x / from edge import x
                    names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                head, _, rest = node.module.partition(".")
                if head == package and rest:
                    names.add(rest.split(".")[0])
            elif isinstance(node, ast.Import):
                names.update(a.name.split(".")[1] for a in node.names if a.name.startswith(package + "."))
        out[path.stem] = (names & modules) - {path.stem}
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project's modules it imports: relative or absolute, inside functions and
    under ``TYPE_CHECKING`` too (a cycle kept for the type checker is still a cycle).
    ``from p import x`` counts as importing ``p.x`` when that is a module, else ``p`` itself."""

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(known(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else known(base))
        out[name] = {m for m in found if m is not None} - {name}
    return out


def within(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """The part of ``graph`` inside ``package`` (its subpackages included)."""
    inside = {m for m in graph if m == package or m.startswith(package + ".")}
    return {m: graph[m] & inside for m in inside}


MODULES = modules_of()
GRAPH = import_graph(MODULES)
PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


def a_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as the modules along it, or [] when there is none."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str]:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return []
        for name in sorted(graph.get(module, ())):
            if found := visit(name, path + [module]):
                return found
        done.add(module)
        return []

    for module in sorted(graph):
        if found := visit(module, []):
            return found
    return []


def test_the_cycle_finder_sees_a_cycle() -> None:
    assert a_cycle({"tail": {"listener"}, "listener": {"tail"}}) in (["listener", "tail", "listener"],
                                                                     ["tail", "listener", "tail"])
    assert a_cycle({"tail": {"listener", "public"}, "listener": {"public"}, "public": set()}) == []


def test_the_import_graph_sees_every_package_and_every_kind_of_import() -> None:
    assert {"castlog", "chunking", "fanout", "durablestreams", "servicekit", "blobstore", "intake", "edge", "synth", "synth.model", "streamtts"} <= set(PACKAGES)
    assert {"castlog.scripts", "synth.model.loader", "fanout.tail", "intake.app"} <= set(MODULES)
    assert "synth.model.base" in GRAPH["synth.model.loader"]  # relative, in a subpackage
    assert "intake.config" in GRAPH["streamtts.launcher"]  # inside a function
    assert "intake.context" in GRAPH["intake.app"]
    assert any("castlog" in GRAPH[m] for m in within(GRAPH, "servicekit"))  # a package by its name
    assert any("synth.model" in GRAPH[m] for m in set(within(GRAPH, "synth")) - set(within(GRAPH, "synth.model")))


@pytest.mark.parametrize("package", PACKAGES)
def test_a_packages_modules_import_each_other_one_way(package: str) -> None:
    """Every package under libs/ and services/, subpackages too (synth/model/). Type-checking
    imports count: intake's live sessions are a Protocol in context.py."""
    assert a_cycle(within(GRAPH, package)) == [], " -> ".join(a_cycle(within(GRAPH, package)))


def test_the_packages_import_each_other_one_way() -> None:
    """Across packages too: castlog below servicekit below the services, never back."""
    assert a_cycle(GRAPH) == [], " -> ".join(a_cycle(GRAPH))


def test_the_listener_knows_the_tail_only_through_its_protocol() -> None:
    assert "fanout.listener" in GRAPH["fanout.tail"] and "fanout.tail" not in GRAPH["fanout.listener"]


def imports_from_parent(folder: Path) -> dict[str, set[str]]:
    """Module of a subpackage -> the names it imports from its parent package (``from ..m import x``
    gives ``m.x``; ``from .. import m`` gives ``m``)."""
    out: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                names.update(f"{node.module}.{a.name}" if node.module else a.name for a in node.names)
        out[path.stem] = names
    return out


def test_intakes_claim_side_never_imports_its_speech_room() -> None:
    """The claim path (submit, live text, validation) knows nothing of streaming audio: only
    ``app.py`` imports ``speech/``, to wire its routes; ``speech/`` imports the claim side's public
    pieces (no ``_private`` name, never the app) and its own modules one way."""
    intake = REPO / "services" / "intake"
    claim_side = package_imports(intake)
    assert "speech" in claim_side["app"] and {"claim", "live", "validate"} <= set(claim_side)
    assert {module for module, names in claim_side.items() if "speech" in names} == {"app"}
    speech = package_imports(intake / "speech")
    assert {"livews", "stream", "formats", "v1", "views"} <= set(speech)
    assert a_cycle(speech) == [], " -> ".join(a_cycle(speech))
    taken = set().union(*imports_from_parent(intake / "speech").values())
    assert {"claim.Screen", "context.INTAKE", "live"} <= taken  # the reading sees them
    modules = {name.split(".")[0] for name in taken}
    assert modules <= set(claim_side) - {"app", "__main__", "__init__", "speech"}, sorted(modules)
    assert not [name for name in taken if name.rpartition(".")[2].startswith("_")]


def test_the_cli_ships_no_test_tools() -> None:
    """#34 item 3: listening, seam and cluster tools imported synth's internals from the shipped
    CLI; they are bench/'s now, and streamtts reads only synth's settings."""
    synth = {name for m in within(GRAPH, "streamtts") for name in GRAPH[m] if name.split(".")[0] == "synth"}
    assert synth == {"synth.config"}
