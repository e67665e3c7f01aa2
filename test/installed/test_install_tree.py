"""The install tree alone.

Every module imports, every executable answers --help, the environment hook sets the DDS profile,
no build debris in share/.
"""
from __future__ import annotations

import configparser
import json
import os
from pathlib import Path

import pytest

from installed.user_env import PKG, REPO


def source_modules() -> set[str]:
    """Module names of the source package (what the install must hold)."""
    root = REPO / PKG
    return {".".join((PKG,) + p.relative_to(root).with_suffix("").parts)
            for p in root.rglob("*.py") if "__pycache__" not in p.parts}


def executables() -> list[str]:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = cfg["options.entry_points"]["console_scripts"].strip().splitlines()
    return [line.split("=")[0].strip() for line in lines if line.strip()]


def test_every_source_module_is_installed(installed):
    site = installed.site
    have = {".".join((PKG,) + p.relative_to(site).with_suffix("").parts)
            for p in site.rglob("*.py")
            if "__pycache__" not in p.parts}
    missing = source_modules() - have
    assert not missing, f"not in the install tree: {sorted(missing)}"
    assert not any(p.is_symlink() for p in site.rglob("*.py")), "not a copy install"


def test_every_module_imports_from_the_install_tree(installed):
    """One process, as a user's: the source checkout is on no path."""
    script = (
        "import importlib, json, sys\n"
        f"mods = {sorted(source_modules())!r}\n"
        "bad = {}\n"
        "for m in mods:\n"
        "    try:\n"
        "        mod = importlib.import_module(m)\n"
        f"        assert {str(REPO)!r} not in (getattr(mod, '__file__', '') or ''), mod.__file__\n"
        "    except ModuleNotFoundError as e:\n"
        "        if e.name not in ('launch', 'launch_ros'):\n"
        "            raise\n"
        "        needs_launch.append(m)\n"
        "    except BaseException as e:\n"
        "        bad[m] = f'{type(e).__name__}: {e}'\n"
        "import vision_dialogue_interfaces.msg, vision_dialogue_interfaces.action\n"
        "import vision_dialogue_interfaces.srv\n"
        "print(json.dumps({'imported': len(mods) - len(bad) - len(needs_launch), 'bad': bad,\n"
        "                  'needs_launch': needs_launch}))\n")
    script = script.replace("bad = {}\n", "bad, needs_launch = {}, []\n")
    res = installed.run(["python3", "-c", script], timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["bad"] == {}, report["bad"]
    # the launch files' description needs ROS 2's `launch` (a ROS 2 install; no wheel here)
    assert set(report["needs_launch"]) <= {"vision_dialogue.ros.launch_description"}
    assert report["imported"] + len(report["needs_launch"]) == len(source_modules())


def test_no_build_debris_in_share(installed):
    share = installed.prefix / "share" / PKG
    debris = (installed.ws / "built").read_text().split()     # listed right after the build
    assert not debris, f"__pycache__ installed under share/: {debris}"
    assert (share / "config" / "fastdds.xml").is_file()
    for launch in ("demo", "standalone", "furhat", "vfm"):
        assert (share / "launch" / f"{launch}.launch.py").is_file()


def test_sourcing_the_install_sets_the_dds_profile(installed):
    profile = installed.env.get("FASTDDS_DEFAULT_PROFILES_FILE", "")
    assert Path(profile) == installed.prefix / "share" / PKG / "config" / "fastdds.xml"
    assert Path(profile).is_file()


def test_ament_index_finds_the_package(installed):
    """What `ros2 run` / `ros2 launch` look up: the package marker and lib/<pkg>/<exe>."""
    res = installed.run(["python3", "-c", "from ament_index_python.packages import "
                         "get_package_prefix, get_package_share_directory as s; "
                         f"print(get_package_prefix('{PKG}')); print(s('{PKG}'))"])
    assert res.returncode == 0, res.stderr
    prefix, share = res.stdout.split()
    assert Path(prefix) == installed.prefix
    for exe in executables():
        path = Path(prefix) / "lib" / PKG / exe
        assert path.is_file() and os.access(path, os.X_OK), path


@pytest.mark.parametrize("exe", executables())
def test_every_executable_answers_help(installed, exe):
    res = installed.run(installed.exe(exe) + ["--help"], timeout=120)
    assert res.returncode == 0, f"{exe} --help: {res.stdout[-1500:]}{res.stderr[-1500:]}"
    assert "usage" in res.stdout.lower(), res.stdout
    assert "Traceback" not in res.stderr


def test_the_robot_workspace_recipe_finds_both_packages(tmp_path):
    """docs/robots.md's `colcon build` in a workspace finds vision_dialogue and its interfaces.

    colcon does not look for a package inside another: a plain `colcon build` finds
    vision_dialogue alone, hence the recipe's second base path.
    """
    import shutil
    import subprocess
    colcon = shutil.which("colcon")
    if colcon is None:
        pytest.skip("colcon is not installed (README command 1 installs it)")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "vision_dialogue").symlink_to(REPO)

    def listed(*args):
        out = subprocess.run([colcon, "list", "--names-only", *args], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, check=True).stdout
        return set(out.split())
    recipe = ["--base-paths", "src", "src/vision_dialogue/interfaces"]
    assert "colcon build " + " ".join(recipe) in (REPO / "docs" / "robots.md").read_text()
    assert listed(*recipe) == {PKG, "vision_dialogue_interfaces"}
    assert listed() == {PKG}
