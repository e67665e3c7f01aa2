"""Redirect the ROS 2 wheels' cmake files from their build prefix to this venv.

The ros-kilted-* wheels were built under /opt/python/cp311-cp311 and their exported cmake
targets name that prefix's Python and numpy include directories. Rewrites them, in place,
inside the given venv only. Idempotent; prints how many files changed.
"""
import pathlib
import sys
import sysconfig

BUILD_PREFIX = "/opt/python/cp311-cp311"


def main(venv: str) -> int:
    import numpy

    root = pathlib.Path(venv)
    py_inc = sysconfig.get_paths()["include"]
    np_inc = numpy.get_include()
    old_np = f"{BUILD_PREFIX}/lib/python3.11/site-packages/numpy/_core/include"
    old_py = f"{BUILD_PREFIX}/include/python3.11"
    changed = 0
    for path in (root / "share").rglob("*.cmake"):
        text = path.read_text(errors="surrogateescape")
        if BUILD_PREFIX not in text:
            continue
        new = text.replace(old_np, np_inc).replace(old_py, py_inc)
        if new != text:
            path.write_text(new, errors="surrogateescape")
            changed += 1
    print(f"[setup] fixed build-prefix paths in {changed} cmake files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.prefix))
