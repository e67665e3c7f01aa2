"""Redirect the ROS 2 wheels' cmake files from their build prefix to this venv.

The ros-kilted-* wheels were built under /opt/python/cp311-cp311 and their exported cmake
targets name that prefix's Python and numpy include directories. Rewrites them, in place,
inside the given venv only. Idempotent, and repairs files a moved venv left pointing at its
old location. Prints how many files changed.
"""
import pathlib
import re
import sys
import sysconfig

BUILD_PREFIX = "/opt/python/cp311-cp311"


def main(venv: str) -> int:
    import numpy

    root = pathlib.Path(venv)
    py_inc = sysconfig.get_paths()["include"]
    np_inc = numpy.get_include()
    # numpy's include dir under any prefix (the build prefix, or where this venv used to be)
    old_np = re.compile(r'[^;"\s]*/site-packages/numpy/_core/include')
    old_py = f"{BUILD_PREFIX}/include/python3.11"
    changed = 0
    for path in (root / "share").rglob("*.cmake"):
        text = path.read_text(errors="surrogateescape")
        if "numpy/_core/include" not in text and BUILD_PREFIX not in text:
            continue
        new = old_np.sub(lambda _: np_inc, text).replace(old_py, py_inc)
        if new != text:
            path.write_text(new, errors="surrogateescape")
            changed += 1
    print(f"[setup] fixed build-prefix paths in {changed} cmake files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else sys.prefix))
