"""The layout is the architecture: which room may import which, read from the source (AST).

ROS-free rooms never import rclpy, ROS message packages or the generated interfaces, so they
are testable without ROS; each room imports only the rooms below it (docs/ARCHITECTURE.md).
Nodes and commands (top-level node modules, ros/, cli/) may import anything.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO

PKG = REPO / "vision_dialogue"
#: room -> the rooms it may import (besides itself), top to bottom as docs/ARCHITECTURE.md's
#: map draws them: each room imports only rooms below it
ALLOWED = {
    "furhat": {"core", "camera", "speech", "llm", "face", "variants", "common"},
    "voice": {"speech", "llm", "variants"},
    "monitor": {"core", "common"},
    "application": {"core", "llm", "common"},
    "core": {"llm", "common"},
    "speech": {"llm", "variants"},
    "camera": {"variants", "common"},
    "perception": {"common"},
    "vfm": {"common"},
    "face": set(),
    "llm": {"variants"},
    "variants": set(),
    "common": set(),
}
ROS_MODULES = ("rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "sensor_msgs",
               "geometry_msgs", "action_msgs", "rosgraph_msgs", "launch", "launch_ros",
               "ament_index_python", "vision_dialogue_interfaces")
INTERFACES_DIR = REPO / "interfaces" / "vision_dialogue_interfaces"
"""The package of our messages, services and actions (generated code: the ROS side)."""
NODE_MODULES = {"manager_node", "camera_node", "speech_node", "vfm_server", "monitor_node",
                "events_node", "detector_node", "people_node"}


def imports(path: Path) -> set[str]:
    """Return the module names the file brings in (absolute; relative ones resolved)."""
    tree = ast.parse(path.read_text(), str(path))
    pkg = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def room_of(module: str) -> str | None:
    """'vision_dialogue.core.prompt' -> 'core'; None outside the package."""
    parts = module.split(".")
    if parts[0] != "vision_dialogue" or len(parts) < 2:
        return None
    return parts[1]


def test_top_level_holds_only_the_nodes():
    top = {p.stem for p in PKG.glob("*.py")} - {"__init__"}
    assert top == NODE_MODULES, top ^ NODE_MODULES
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert rooms == set(ALLOWED) | {"ros", "cli"}


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_ros_free_rooms_import_only_what_is_below_them(room):
    bad = []
    for path in sorted((PKG / room).rglob("*.py")):
        for mod in imports(path):
            top = mod.split(".")[0]
            other = room_of(mod)
            if top in ROS_MODULES:
                bad.append(f"{path.relative_to(REPO)} imports {mod} (ROS)")
            elif other in NODE_MODULES or other in ("ros", "cli"):
                bad.append(f"{path.relative_to(REPO)} imports {mod} (ROS side)")
            elif other and other != room and other not in ALLOWED[room]:
                bad.append(f"{path.relative_to(REPO)} imports {mod} ({other} is not below "
                           f"{room})")
    assert not bad, "\n".join(bad)


def test_the_rooms_are_layers_drawn_in_order():
    """Each room may import only rooms below it, and the map draws them in that order.

    docs/ARCHITECTURE.md's map lists the ROS-free rooms top to bottom; ALLOWED goes in the
    same order. The application sits above the conversation, the shared helpers (common/)
    below every room.
    """
    rooms = list(ALLOWED)
    upward = [f"{room} may import {other}, drawn above it" for i, room in enumerate(rooms)
              for other in sorted(ALLOWED[room]) if rooms.index(other) <= i]
    assert not upward, upward
    doc = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    ros_free = doc[doc.index("ROS-free below this line"):]
    drawn = re.findall(r"^  ([a-z_]+)/ ", ros_free[:ros_free.index("```")], re.M)
    assert drawn == rooms, f"the map draws {drawn}; ALLOWED goes {rooms}"
    assert all(not ALLOWED[room] - {"variants"} for room in ("common", "variants", "llm")), \
        "the bottom rooms import nothing but variants"


@pytest.mark.parametrize("room", sorted(ALLOWED) + ["ros", "cli"])
def test_every_room_says_what_lives_there(room):
    doc = ast.get_docstring(ast.parse((PKG / room / "__init__.py").read_text()))
    assert doc and len(doc) > 60, f"{room}/__init__.py needs a docstring"
    if room in ALLOWED:
        assert "ROS-free" in doc or "without ROS" in doc


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def package_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in the file, lazily or not)."""
    modules = {module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in imports(path) if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_nothing_comes_from_the_package_root():
    """vision_dialogue/__init__.py holds nothing: each name is imported from its module."""
    names = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if p.is_dir()}
    bad = [f"{path.relative_to(REPO)} imports vision_dialogue.{a.name}"
           for path in sorted(PKG.rglob("*.py"))
           for node in ast.walk(ast.parse(path.read_text()))
           if isinstance(node, ast.ImportFrom) and node.module == "vision_dialogue"
           for a in node.names if a.name not in names]
    assert not bad, "\n".join(bad)


def test_no_module_imports_one_that_imports_it_back():
    graph = package_graph()
    assert len(graph) > 100
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]   # the check works
    assert cycles(graph) == []


def test_the_ros_side_never_imports_a_command_or_a_node():
    bad = [f"{path.relative_to(REPO)} imports {mod}"
           for path in sorted((PKG / "ros").rglob("*.py")) for mod in imports(path)
           if room_of(mod) == "cli" or room_of(mod) in NODE_MODULES]
    assert not bad, "\n".join(bad)


#: the helper objects a Conversation is made of: the ROS side asks the Conversation by name
CONVERSATION_HELPERS = {"config", "prompt", "timeline", "builder", "archive", "summariser",
                        "folder", "warmer", "look_back", "turn_tools", "replies"}


def helper_reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, "conversation.helper") where code reaches into a Conversation's helper object."""
    def name(node) -> str:
        return node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return sorted((n.lineno, f"{name(n.value)}.{n.attr}") for n in ast.walk(tree)
                  if isinstance(n, ast.Attribute) and n.attr in CONVERSATION_HELPERS
                  and name(n.value) in ("conversation", "conv", "_conversation"))


def test_the_ros_side_asks_the_conversation_by_name():
    """Nodes, ros/ and cli/ use Conversation's own methods, never its helper objects."""
    sample = ast.parse("self.conversation.builder.notes['x'] = 1\nconv.tune(stream=True)\n"
                       "conv.prompt.newest")
    assert helper_reaches(sample) == [(1, "conversation.builder"), (3, "conv.prompt")]
    ros_side = [p for p in sorted(PKG.rglob("*.py"))
                if p.parent == PKG or p.relative_to(PKG).parts[0] in ("ros", "cli")]
    bad = [f"{path.relative_to(REPO)}:{line}: {reach}" for path in ros_side
           for line, reach in helper_reaches(ast.parse(path.read_text()))]
    assert not bad, "\n".join(bad)


def assigned_attributes(tree: ast.AST) -> list[tuple[int, ast.Attribute]]:
    """(line, target) of each attribute assigned under `tree` (tuple targets unpacked)."""
    return [(node.lineno, each) for node in ast.walk(tree)
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            for each in (target.elts if isinstance(target, ast.Tuple) else [target])
            if isinstance(each, ast.Attribute)]


def hook_assignments(tree: ast.AST, hooks: set[str]) -> list[tuple[int, str]]:
    """(line, attribute) of each assignment to an attribute named like a TurnHooks field."""
    return [(line, each.attr) for line, each in assigned_attributes(tree) if each.attr in hooks]


def test_the_turn_takers_hooks_are_given_when_it_is_made():
    """No module sets a turn-taking hook on an object: TurnHooks are given to TurnTaker.

    (Three modules once set six hook attributes, and one setting replaced another's.)
    """
    import dataclasses

    from vision_dialogue.core.turn_taking import TurnHooks
    hooks = {f.name for f in dataclasses.fields(TurnHooks)}
    sample = ast.parse("turns.claim = f\nx.y = 1\nt.on_start, t.on_shared = a, b")
    assert hook_assignments(sample, hooks) == [(1, "claim"), (3, "on_start"), (3, "on_shared")]
    bad = [f"{path.relative_to(REPO)}:{line}: .{attr} =" for path in sorted(PKG.rglob("*.py"))
           for line, attr in hook_assignments(ast.parse(path.read_text()), hooks)]
    assert not bad, "\n".join(bad)


def private_writes(cls: ast.ClassDef) -> list[tuple[int, str]]:
    """(line, attribute) of each `self._x = ...` in a class's methods."""
    return [(line, each.attr) for method in cls.body
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef))
            for line, each in assigned_attributes(method)
            if isinstance(each.value, ast.Name) and each.value.id == "self"
            and each.attr.startswith("_") and not each.attr.startswith("__")]


def test_no_mixin_writes_the_private_state_of_the_class_it_joins():
    """A mixin (a base without __init__) keeps to its class's public names.

    (DirectedLines once counted Conversation's turns through its private `_turn_id`.)
    """
    classes = {(path, c) for path in sorted(PKG.rglob("*.py"))
               for c in ast.walk(ast.parse(path.read_text())) if isinstance(c, ast.ClassDef)}
    bases = {b.id for _, c in classes for b in c.bases if isinstance(b, ast.Name)}
    mixins = [(path, c) for path, c in classes if c.name in bases and not any(
        isinstance(m, ast.FunctionDef) and m.name == "__init__" for m in c.body)]
    assert "DirectedLines" in {c.name for _, c in mixins}
    bad = [f"{path.relative_to(REPO)}:{line}: {c.name} writes self.{attr}"
           for path, c in mixins for line, attr in private_writes(c)]
    assert not bad, "\n".join(bad)


MANAGER_ROOM = "vision_dialogue.ros.manager"
"""The manager's own ROS side: imported by manager_node.py and its own modules alone."""


def manager_only(importers: set[str]) -> bool:
    """Whether every importer is the manager node or a module of its room."""
    return all(m == "vision_dialogue.manager_node" or m.startswith(MANAGER_ROOM + ".")
               for m in importers)


def test_the_managers_ros_side_is_its_own_room():
    """ros/manager/ serves the manager alone, and what serves the manager alone is there."""
    graph = package_graph()
    importers: dict[str, set[str]] = {m: set() for m in graph}
    for module, used in graph.items():
        for m in used:
            importers[m].add(module)
    room = [m for m in graph if m.startswith(MANAGER_ROOM + ".")]
    assert len(room) >= 10
    outside = [f"{m} is imported by {sorted(importers[m])}" for m in room
               if not manager_only(importers[m])]
    assert not outside, "\n".join(outside)
    shared = [m for m in graph if m.startswith("vision_dialogue.ros.")
              and not m.startswith(MANAGER_ROOM) and m.count(".") == 2]
    misplaced = [f"{m} serves only {sorted(importers[m])}: move it to ros/manager/"
                 for m in shared if importers[m] and manager_only(importers[m])]
    assert not misplaced, "\n".join(misplaced)
    assert manager_only({"vision_dialogue.manager_node"})
    assert not manager_only({"vision_dialogue.speech_node", "vision_dialogue.manager_node"})


#: the calls whose second argument (or `topic=`) names a topic, service or action
NAMING_CALLS = {"create_publisher", "create_subscription", "create_service", "create_client",
                "ActionServer", "ActionClient"}


def topic_names() -> dict[str, str]:
    """The names ros/topics.py defines (value -> its constant) and where it defines them."""
    names = {}
    for node in ast.parse((PKG / "ros" / "topics.py").read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id.endswith(
                    ("_TOPIC", "_ACTION", "_SERVICE", "_ACTIONS")):
                names.update((c.value, target.id) for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return names


def literal_topic_names(tree: ast.AST, names: dict[str, str]) -> list[tuple[int, str]]:
    """(line, name) of each topic name written as a literal rather than its constant.

    A name with a slash that ros/topics.py defines, anywhere but a docstring; any string as
    the name a publisher, subscription, service, client or action takes; a REP-155 id's own
    topic built by hand (`f"/humans/faces/{fid}/roi"`, not `hri_topic`).
    """
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    found = [(n.lineno, n.value) for n in ast.walk(tree)
             if isinstance(n, ast.Constant) and isinstance(n.value, str) and "/" in n.value
             and n.value in names and id(n) not in docs]
    found += [(n.lineno, n.values[0].value) for n in ast.walk(tree)     # one id's: hri_topic
              if isinstance(n, ast.JoinedStr) and n.values
              and isinstance(n.values[0], ast.Constant)
              and str(n.values[0].value).startswith("/humans/")]
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = getattr(call.func, "attr", getattr(call.func, "id", ""))
        given = call.args[1:2] + [k.value for k in call.keywords if k.arg == "topic"]
        found += [(a.lineno, a.value) for a in given if name in NAMING_CALLS
                  and isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return sorted(set(found))


def test_every_topic_name_comes_from_ros_topics():
    """One definition of each name: a node or a command that writes one out gets a failure."""
    names = topic_names()
    assert names["dialogue/reply"] == "REPLY_TOPIC" and len(names) > 40
    sample = ast.parse('"""dialogue/reply"""\nnode.create_publisher(Reply, "dialogue/reply", 1)\n'
                       'node.create_subscription(Bool, "my_topic", cb, 1)\nx = "dialogue/reply"\n'
                       'y = f"/humans/faces/{fid}/roi"')
    assert literal_topic_names(sample, names) == [(2, "dialogue/reply"), (3, "my_topic"),
                                                  (4, "dialogue/reply"), (5, "/humans/faces/")]
    from vision_dialogue.ros.topics import hri_topic
    assert hri_topic("faces", "f1", "roi") == "/humans/faces/f1/roi"
    with pytest.raises(ValueError, match="REP-155"):
        hri_topic("face", "f1", "roi")
    bad = [f"{path.relative_to(REPO)}:{line}: {value!r}"
           + (f" (ros/topics.py's {names[value]})" if value in names else "")
           for path in sorted(PKG.rglob("*.py")) if path != PKG / "ros" / "topics.py"
           for line, value in literal_topic_names(ast.parse(path.read_text()), names)]
    assert not bad, "\n".join(bad)


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 600, 60
MAX_CLASS_METHODS = 25
#: classes still over MAX_CLASS_METHODS, with the most methods each may have until it is split
BIG_CLASSES: dict[str, int] = {}    # none left over the limit


def test_modules_and_functions_stay_small():
    big = []
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            big.append(f"{path.relative_to(REPO)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    big.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: "
                               f"{length} lines")
    assert not big, "\n".join(big)


def class_sizes() -> dict[str, int]:
    """`module.Class` -> how many methods it defines itself."""
    return {f"{module_name(path)}.{node.name}": sum(
                isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) for m in node.body)
            for path in sorted(PKG.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.ClassDef)}


def test_no_class_grows_past_its_methods():
    """No class over MAX_CLASS_METHODS methods; the ones over it may only shrink.

    BIG_CLASSES is the baseline still to split (a class that shrinks under the limit leaves
    it; one that grows fails).
    """
    sizes = class_sizes()
    over = {name: n for name, n in sizes.items() if n > MAX_CLASS_METHODS}
    grown = [f"{name}: {n} methods (at most {BIG_CLASSES.get(name, MAX_CLASS_METHODS)})"
             for name, n in sorted(over.items()) if n > BIG_CLASSES.get(name, MAX_CLASS_METHODS)]
    assert not grown, "\n".join(grown)
    stale = sorted(set(BIG_CLASSES) - set(over))
    assert not stale, f"split under {MAX_CLASS_METHODS}: take them out of BIG_CLASSES: {stale}"


def test_the_unit_tier_runs_without_ros():
    """test/unit passes where rclpy and every ROS package cannot be imported.

    scripts/test.sh runs that tier so (VD_BLOCK_ROS=1) before the rest; a plain `pytest` run
    checks it here in a process of its own.
    """
    import os
    import subprocess
    import sys
    if os.environ.get("VD_BLOCK_ROS") == "1" or os.environ.get("VD_UNIT_TIER_RAN") == "1":
        pytest.skip("this run's unit tier ran with ROS blocked (scripts/test.sh)")
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=-ra", "test/unit",
                          "-k", "not test_the_unit_tier_runs_without_ros"],
                         cwd=REPO, env=dict(os.environ, VD_BLOCK_ROS="1"),
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    # pytest's closing line: passes and no errors (the fault matrix above it may say "errors")
    summary = res.stdout.strip().splitlines()[-1]
    assert " passed" in summary and not re.search(r"\d+ errors?\b", summary), summary


def test_the_architecture_map_names_every_module_and_conventions_every_executable():
    arch = (REPO / "docs" / "ARCHITECTURE.md").read_text()
    unnamed = [str(p.relative_to(PKG)) for p in sorted(PKG.rglob("*.py"))
               if p.stem != "__init__" and not re.search(rf"\b{p.stem}\b", arch)]
    assert not unnamed, f"docs/ARCHITECTURE.md does not name {unnamed}"
    conventions = (REPO / "docs" / "CONVENTIONS.md").read_text()
    executables = re.findall(r"^\s+(\w+) = vision_dialogue\.", (REPO / "setup.cfg").read_text(),
                             re.M)
    assert len(executables) >= 11
    missing = [e for e in executables + sorted(NODE_MODULES) if f"`{e}`" not in conventions]
    assert not missing, f"docs/CONVENTIONS.md does not name {missing}"
    rooms = [r for r in ALLOWED if f"`{r}/`" not in conventions]
    assert not rooms, f"docs/CONVENTIONS.md's ROS-free rooms miss {rooms}"


#: names the docs use that belong to other projects: ROS 2, Python, transformers, the Furhat
#: Remote API's gestures and errors; a name of ours that the docs use must exist in the code
OTHER_PROJECTS = frozenset("""
ApiException AutoModelForCausalLM AutoModelForImageTextToText AutoProcessor BigSmile
CompressedImage Context ExpressAnger ExpressDisgust ExpressFear ExpressSad GazeAway GroupAction
Image LiveSpeech LlavaProcessor MaxRetryError MultiThreadedExecutor Node OpaqueFunction
PushROSNamespace PyYAML ReentrantCallbackGroup Result RewrittenYaml SetEnvironmentVariable
Surprise TextIteratorStreamer Thoughtful ThreadingHTTPServer Trigger True None ValueError
WIDTHxHEIGHT gc torch generate get_part_path repr get_subscription_count SQLAlchemy
""".split())
FILE_SUFFIXES = ("txt", "pth", "wav", "yaml", "py", "json", "md", "gguf", "onnx", "xml")


def defined_names() -> set[str]:
    """Name the package's classes, functions, assigned names and message types."""
    names = set()
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for n in (x for t in targets for x in ast.walk(t)):
                    names.add(n.id if isinstance(n, ast.Name) else getattr(n, "attr", ""))
    for folder in ("msg", "srv", "action"):
        for path in (INTERFACES_DIR / folder).glob("*"):
            names.add(path.stem)                            # the type, and its fields
            names |= {line.split()[1] for line in path.read_text().splitlines()
                      if len(line.split()) > 1 and not line.lstrip().startswith(("#", "---"))}
    return names


#: pages the docs site writes into docs/ from elsewhere (gitignored; docs/_ext/vd_reference.py)
GENERATED_PAGES = ("changelog.md", "readme.md", "results.md")


def test_the_docs_name_only_classes_and_functions_that_exist():
    """A `ClassName`, `ClassName.member` or `function()` the docs name is in the code.

    Or in another project (OTHER_PROJECTS): a rename that leaves the docs behind fails here.
    """
    defined = defined_names()
    named = re.compile(r"`([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(\(\))?`")
    stale = set()
    generated = set(GENERATED_PAGES)        # history (the changelog) names what was renamed
    for doc in [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md")
                                            if p.name not in generated)]:
        for m in named.finditer(doc.read_text()):
            parts = m.group(1).split(".")
            camel = parts[0][0].isupper() and any(c.islower() for c in parts[0])
            if parts[-1] in FILE_SUFFIXES or parts[0] in OTHER_PROJECTS or \
                    not (camel or m.group(2)):
                continue
            wanted = parts if camel else parts[-1:]
            if any(x not in defined for x in wanted):
                stale.add(f"{doc.name}: {m.group(0)}")
    assert not stale, f"the docs name what the code does not have: {sorted(stale)}"
