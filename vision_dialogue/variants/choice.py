"""Which variant a node starts when a file parameter is given: the file means the variant.

`camera_node -p video_path:=X` plays X, and `speech_node -p script_file:=S` plays S, without
`source:=video` or `backend:=script` also being said. The kind parameter's default, AUTO, takes
the variant whose file is given (or the fallback); an explicit kind that contradicts a given
file is an error naming both. ROS-free.
"""
from __future__ import annotations

AUTO = "auto"


def choose_variant(kind_param: str, kind: str, files: dict[str, tuple[str, str]],
                   fallback: str) -> str:
    """The variant to start.

    files: {variant: (file parameter name, its value)}; a value that is blank is not given.
    Raises ValueError (message starting with a parameter name) for a contradiction.
    """
    given = {v: (name, path) for v, (name, path) in files.items() if str(path).strip()}
    if kind == AUTO:
        if len(given) > 1:
            names = " and ".join(f"{name}={path!r}" for name, path in given.values())
            raise ValueError(f"{kind_param}: {names} are both given; keep one, or set "
                             f"{kind_param}:=<one of {', '.join(given)}>")
        return next(iter(given), fallback)
    for variant, (name, path) in given.items():
        if variant != kind:
            raise ValueError(f"{name}={path!r} is given with {kind_param}={kind}: a {name} is "
                             f"played by {kind_param}:={variant} (or {AUTO}); drop one of them")
    return kind
