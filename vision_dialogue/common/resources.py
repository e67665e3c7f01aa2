"""Where the package's data files, the integrator's lists and the user's own files are.

The data files are config/, launch/ and msg/; the user's files go where the XDG base
directories say (`user_path`).

Running from a source checkout they sit beside the `vision_dialogue/` folder; running from
an install they are in `<prefix>/share/vision_dialogue/`, found on `AMENT_PREFIX_PATH` (what
ament_index does, without needing it). One lookup for every caller, so the persona, the DDS
profile, the setups and the bag types all come from the same place.
"""
from __future__ import annotations

import os
from pathlib import Path

import yaml

PACKAGE = "vision_dialogue"
#: the XDG base directories a default path may start with, and where each is when unset
XDG_HOMES = {"XDG_DATA_HOME": "~/.local/share", "XDG_STATE_HOME": "~/.local/state"}
#: the folder holding vision_dialogue/ in a source checkout (not meaningful when installed)
SOURCE_ROOT = Path(__file__).resolve().parents[2]


class ResourceNotFound(FileNotFoundError):
    """A data folder of the package is neither in the checkout nor in an install."""


def share_dir(sub: str) -> Path:
    """config/, launch/ or msg/ of the source checkout, else of the installed package."""
    here = SOURCE_ROOT / sub
    if here.is_dir() and (SOURCE_ROOT / "package.xml").is_file():
        return here
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        cand = Path(prefix) / "share" / PACKAGE / sub
        if prefix and cand.is_dir():
            return cand
    raise ResourceNotFound(f"cannot find {PACKAGE}'s {sub}/ directory (not in a source "
                           "checkout, and no install on AMENT_PREFIX_PATH)")


def user_path(path: str) -> Path:
    """A path in the user's files, a leading XDG variable and '~' expanded.

    A leading `$XDG_DATA_HOME/` or `$XDG_STATE_HOME/` comes from the environment (its XDG
    default when unset or empty). The XDG Base Directory spec says where a user keeps data
    and state; a user who moved them expects the people store and the memory queue to follow.
    """
    for name, default in XDG_HOMES.items():
        head = f"${name}"
        if path == head or path.startswith(head + "/"):
            path = (os.environ.get(name) or default) + path[len(head):]
            break
    return Path(os.path.expanduser(path))


def config_file(name: str) -> Path:
    """A file in config/ (it may not exist: callers say what is missing)."""
    return share_dir("config") / name


def declared_list(path: str | Path, key: str, error: type[ValueError],
                  bare: bool = False) -> tuple[Path, list]:
    """The non-empty list under `key:` of a YAML file an integrator writes (intents, tools).

    `bare`: a list alone is taken too. Raises `error` naming the file and the problem.
    """
    p = Path(path).expanduser()
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise error(f"{p}: cannot read ({e})") from None
    items = raw.get(key) if isinstance(raw, dict) else raw if bare else None
    if not isinstance(items, list) or not items:
        raise error(f"{p}: expected a list under '{key}:'")
    return p, items
