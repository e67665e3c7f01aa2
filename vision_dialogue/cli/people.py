"""people: the operator's view of the people the robot knows (the same store people_node uses).

    people list                                   # who is known, with their consent records
    people enrol --name Ada --photo ada.jpg [--wav ada.wav]   # with their consent, by hand
    people forget --name Ada | --id person_abcdefgh [--transcripts runs/transcripts]
    people export > people.json                   # everything kept (a person's right to see it)
    people export person_abcdefgh > one.json      # everything kept of one person, memory too
    people expire --days 30                       # forget everyone not seen for 30 days

The store is `--store` (default: people_node's default, sqlite:///$XDG_DATA_HOME/...). A
running people_node reads the store when it starts; enrolments made here are matched from its
next start, and `people forget` on a running robot is better done through its
`people/forget` service (it also drops the person from the session, and the running manager
clears its transcripts). `--transcripts` clears the transcripts of managers that are not
running (their lines and the frames of their runs; a run a manager writes is left to it).
"""
from __future__ import annotations

import argparse
import json
import sys

from vision_dialogue.application.identity.embedders import ModelMissing
from vision_dialogue.application.identity.store import DEFAULT_STORE_URL, PeopleStore, StoreError


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="people", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", default=DEFAULT_STORE_URL, help="the people store's URL")
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="who is known")
    enrol = sub.add_parser("enrol", help="remember a person from a photo (and a recording)")
    enrol.add_argument("--name", required=True)
    enrol.add_argument("--photo", required=True, help="a photo with one frontal face")
    enrol.add_argument("--wav", help="a recording of their voice (a few seconds)")
    forget = sub.add_parser("forget", help="forget a person: nothing of them is left")
    who = forget.add_mutually_exclusive_group(required=True)
    who.add_argument("--name")
    who.add_argument("--id")
    forget.add_argument("--transcripts", metavar="DIR",
                        help="also clear them from the transcripts under DIR (the manager's "
                        "transcript_dir, e.g. runs/transcripts)")
    export = sub.add_parser("export", help="everything the store keeps (of one person, "
                            "their memory and its audit too), as JSON")
    export.add_argument("person_id", nargs="?", default="")
    expire = sub.add_parser("expire", help="forget everyone not seen for this many days")
    expire.add_argument("--days", type=float, required=True)
    return ap.parse_args(argv)


def photo_print(path: str):
    """The face print of the one face in a photo (a clear error for none or several)."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    from vision_dialogue.application.identity.embedders import FaceEmbedder
    try:
        rgb = np.asarray(Image.open(path).convert("RGB"))
    except (OSError, UnidentifiedImageError) as e:
        raise ValueError(f"cannot read the photo {path}: {e}") from None
    faces = FaceEmbedder()
    boxes = faces.faces_in(rgb)
    if len(boxes) != 1:
        raise ValueError(f"{path}: {len(boxes)} frontal faces; a photo of one person, "
                         "facing the camera, is needed")
    x, y, w, h = boxes[0]
    m = w // 4
    return faces.embed(rgb[max(0, y - m):y + h + m, max(0, x - m):x + w + m])


def wav_print(path: str):
    import soundfile

    from vision_dialogue.application.identity.embedders import VoiceEmbedder
    try:
        samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
    except RuntimeError as e:
        raise ValueError(f"cannot read the recording {path}: {e}") from None
    return VoiceEmbedder().embed(samples.mean(axis=1), rate)


def run(ns: argparse.Namespace) -> int:
    from vision_dialogue.application.identity.memory import PersonMemory
    from vision_dialogue.application.identity.records import Consent, ConsentWay
    store = PeopleStore(ns.store)
    if ns.command == "list":
        for p in store.people():
            print(f"{p.person_id}  {p.name or '(no name)':20s} faces {p.faces} voices "
                  f"{p.voices}  consent: {p.consent.way.value}, {p.consent.answer!r}")
    elif ns.command == "enrol":
        prints = [photo_print(ns.photo)] + ([wav_print(ns.wav)] if ns.wav else [])
        pid = store.enrol(ns.name, prints, Consent(
            ConsentWay.OPERATOR, question="enrolled by an operator with the person's consent",
            answer="people enrol"))
        print(pid)
    elif ns.command == "forget":
        return forget(store, ns)
    elif ns.command == "expire":
        removed = PersonMemory(store).expire(ns.days)
        print(f"forgot {len(removed)} not seen for {ns.days:g} days")
    elif ns.person_id:
        person = PersonMemory(store).export(ns.person_id)
        if person is None:
            print(f"people: nobody has the id {ns.person_id}", file=sys.stderr)
            return 1
        json.dump(person, sys.stdout, indent=1)
        print()
    else:
        json.dump(store.export(), sys.stdout, indent=1)
        print()
    return 0


def forget(store: PeopleStore, ns: argparse.Namespace) -> int:
    """Out of the store; with --transcripts, out of the transcripts under that folder too."""
    from vision_dialogue.common.redaction import ForgottenPeople, redact_transcripts
    known = store.person(ns.id) if ns.id else None
    names = tuple(n for n in (ns.name, known and known.name) if n)
    removed = store.forget(person_id=ns.id or "", name=ns.name or "")
    print("\n".join(removed) or "nobody of that id or name in the store")
    if ns.transcripts:
        runs = redact_transcripts(ns.transcripts,
                                  ForgottenPeople(tuple(removed) + ((ns.id,) if ns.id else ()),
                                                  names))
        changed = [r for r in runs if r.lines]
        print(f"transcripts: {sum(r.lines for r in changed)} lines in {len(changed)} runs "
              f"redacted, {sum(r.frames for r in changed)} frames deleted")
        for r in runs:
            if r.skipped:
                print(f"transcripts: {r.run} is being written by a running manager: it "
                      "clears its own run when people_node forgets them", file=sys.stderr)
        return 0 if removed or changed else 1
    return 0 if removed else 1


def main(args=None) -> int:
    ns = parse(list(sys.argv[1:] if args is None else args[1:]))
    try:
        return run(ns)
    except (StoreError, ModelMissing, ValueError) as e:
        print(f"people: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
