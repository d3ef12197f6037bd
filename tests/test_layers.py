"""The library's layers (architecture page), read from the imports of every module in core/.

From the bottom: the shared kinds (typing, errors, coalitions, parallel, progress, versions,
optional dependencies, the missing-value rule, atomic writes, bounded caches) →
input tables and the three axes that know nothing of each other (conformal families, models,
attribution methods) → games → system and decomposition → explainer → workflow → output → cli.
A module imports only from its own layer or below, core imports nothing from the folders on
top of it, and no two modules import each other, however indirectly. Module names are read
without the one package they live in (`cpdecomp.core.games` is `core.games` here); an import of
the checkout's bare `core`, `app` or `sample_data` (which would load a second copy of them) fails
everywhere in the repository.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
PACKAGE = "cpdecomp"
BARE = ("core", "app", "sample_data")
"""The checkout's folders that are importable only as cpdecomp.core, cpdecomp.app, ..."""
ABOVE = ("app", "experiments", "benchmarks", "sample_data", "streamlit")
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core.typing", "core.errors", "core.coalitions", "core.parallel", "core.progress",
     "core.versions", "core.optional", "core.missing", "core.atomic", "core.bounded",
     "core.cancel", "core.workers", "core.coverage", "core.kernel_cache"),
    ("core.tables", "core.data", "core.model_files", "core.conformal", "core.models",
     "core.attribution"),
    ("core.games",),
    ("core.system", "core.decomposition", "core.mapie", "core.interactions"),
    ("core.explainer",),
    ("core.workflow", "core.interop", "core.recalibration", "core.refit"),
    ("core.output", "core.warmup"),
    ("core.cli",),
)
AXES = ("core.conformal", "core.models", "core.attribution")
"""Layer-1 groups that must not import each other (input tables may be read by all)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, runtime_only: bool = False) -> set[str]:
    """Every module imported anywhere in the file, function-level imports included (with
    runtime_only, not those under `if TYPE_CHECKING:`, which never run)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if runtime_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                node.body = []
    return {unpackaged(name) for name in absolute_imports(tree)}


def absolute_imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def unpackaged(name: str) -> str:
    """cpdecomp.core.x -> core.x; the front door `cpdecomp` stays itself."""
    return name.removeprefix(PACKAGE + ".") if name != PACKAGE else name


GRAPH = {module_name(p): imports_of(p) for p in sorted(CORE.rglob("*.py"))}
RUNTIME = {module_name(p): imports_of(p, runtime_only=True) for p in sorted(CORE.rglob("*.py"))}


def group_of(module: str) -> tuple[int, str]:
    for level, groups in enumerate(LAYERS):
        for group in groups:
            if module == group or module.startswith(group + "."):
                return level, group
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_module_imports_only_its_own_layer_or_below(module):
    if module == "core":
        return  # the package's front door re-exports the public names of every layer
    level, group = group_of(module)
    for imported in sorted(GRAPH[module]):
        top = imported.split(".")[0]
        assert top not in ABOVE, f"{module} imports {imported}, which sits above core"
        if top != "core" or imported == "core":
            assert imported not in ("core", PACKAGE), f"{module} imports the package front door"
            continue
        other_level, other_group = group_of(imported)
        assert other_level <= level, f"{module} (layer {level}) imports {imported} " \
                                     f"(layer {other_level})"
        if other_level == level and group in AXES:
            assert other_group == group or other_group not in AXES, \
                f"the axes know nothing of each other: {module} imports {imported}"


def test_no_import_cycles():
    modules = set(GRAPH)

    def targets(module: str) -> set[str]:
        return {m for m in RUNTIME[module] if m in modules and m != module and m != "core"}

    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for nxt in targets(module):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " → ".join([*trail, module, nxt]))
            if nxt not in state:
                visit(nxt, [*trail, module])
        state[module] = 2

    for module in sorted(modules):
        if module not in state:
            visit(module, [])


SOURCES = sorted(p for folder in ("core", "app", "sample_data", "experiments", "benchmarks",
                                  "tests", "cpdecomp") for p in (ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_the_checkouts_bare_folders(path):
    """`import core` from a checkout would load a second copy of cpdecomp.core (two module
    objects, two caches, isinstance failing across them); in an install it fails outright."""
    bare = {name for name in absolute_imports(ast.parse(path.read_text(encoding="utf-8")))
            if name.split(".")[0] in BARE}
    assert not bare, f"{path.relative_to(ROOT)} imports {sorted(bare)}: use cpdecomp.<name>"
