"""InOwnProcess: an embedder's prints in a spawned, niced process of its own.

dlib holds the interpreter lock through a whole print; in the manager's process (bringup) the
reply's token loop stalled behind it. The fakes here live in this module, which the print
process imports by name (the parent's sys.path goes with a spawned process).
"""
from __future__ import annotations

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest

from conftest import until
from pids import alive

from vision_dialogue.application.identity.embedders import PRINT_NICENESS, IdentityInputError, \
    InOwnProcess, ModelMissing
from vision_dialogue.application.identity.records import Embedding, Modality

pytestmark = pytest.mark.timeout(120)
#: a file the hanging print makes when it begins (the spawned process gets the environment)
STARTED = "VD_TEST_PRINT_STARTED"


class WhereAmI:
    """A fake printer whose print says which process made it, at which niceness."""

    modality, model, version = Modality.FACE, "where", "1"

    def embed(self, rgb: np.ndarray) -> Embedding:
        if rgb.size == 0:
            raise IdentityInputError("an empty crop")
        if rgb.size == 1:
            os._exit(3)          # a crash in native code, as far as the parent can tell
        if rgb.size == 2:
            import time
            if os.environ.get(STARTED):
                open(os.environ[STARTED], "w").close()      # the print has begun
            time.sleep(600)      # a print that hangs
        return Embedding(self.modality, self.model, self.version,
                         np.array([os.getpid(), os.nice(0)], np.float32))


class NotInstalled:
    def __init__(self):
        raise ModelMissing("no such model here")


class DiesLoading:
    model = "dies"

    def __init__(self):
        os._exit(5)          # as a main script without its guard ends the spawned process


def test_prints_are_made_in_another_process_that_yields_the_cores():
    printer = InOwnProcess(WhereAmI)
    try:
        pid, niceness = printer.embed(np.zeros((2, 2, 3), np.uint8)).vector
        assert (printer.modality, printer.model, printer.version) == (Modality.FACE, "where", "1")
        assert int(pid) != os.getpid()
        assert int(niceness) == min(19, os.nice(0) + PRINT_NICENESS)
    finally:
        printer.close()
    assert not multiprocessing.active_children()        # closed: its process has ended


def test_errors_come_back_as_raised_and_a_dead_print_process_is_started_again():
    with pytest.raises(ModelMissing, match="no such model"):
        InOwnProcess(NotInstalled)
    with pytest.raises(ModelMissing, match="dies: its print process did not load it"):
        InOwnProcess(DiesLoading)          # the node then goes on without it (a WARN)
    printer = InOwnProcess(WhereAmI)
    try:
        with pytest.raises(IdentityInputError, match="an empty crop"):
            printer.embed(np.zeros((0, 0, 3), np.uint8))
        first = printer.embed(np.zeros((2, 2, 3), np.uint8)).vector[0]
        with pytest.raises(IdentityInputError, match="print process ended"):
            printer.embed(np.zeros((1, 1, 1), np.uint8))
        again = printer.embed(np.zeros((2, 2, 3), np.uint8)).vector[0]
        assert again != first                               # a new process prints now
    finally:
        printer.close()


def test_a_print_that_hangs_ends_in_time_and_the_next_one_is_made():
    printer = InOwnProcess(WhereAmI, print_timeout=2.0)
    try:
        first = printer.embed(np.zeros((2, 2, 3), np.uint8)).vector[0]
        with pytest.raises(IdentityInputError, match="print process hung"):
            printer.embed(np.zeros((1, 2, 1), np.uint8))
        again = printer.embed(np.zeros((2, 2, 3), np.uint8)).vector[0]
        assert again != first and not alive(int(first))     # the hung one was ended
    finally:
        printer.close()
    assert not multiprocessing.active_children()


def test_a_real_face_prints_the_same_in_its_own_process():
    pytest.importorskip("dlib", reason="requirements/identity.txt is not installed")
    from PIL import Image

    from conftest import REPO
    from vision_dialogue.application.identity.embedders import FaceEmbedder
    here = FaceEmbedder()
    rgb = np.asarray(Image.open(REPO / "test" / "data" / "people" / "obama" / "1.jpg")
                     .convert("RGB"))
    [(x, y, w, h)] = here.faces_in(rgb)
    face = rgb[y:y + h, x:x + w]
    printer = InOwnProcess(FaceEmbedder)
    try:
        there = printer.embed(face)
    finally:
        printer.close()
    assert there.version == here.version
    assert np.allclose(there.vector, here.embed(face).vector, atol=1e-5)


def test_a_stop_ends_a_print_in_progress_at_once_and_starts_no_other(tmp_path, monkeypatch):
    """The people node's stop: a niced print under load outlasted bringup's grace."""
    started = tmp_path / "started"
    monkeypatch.setenv(STARTED, str(started))
    printer = InOwnProcess(WhereAmI)
    raised: list[str] = []

    def hang() -> None:
        try:
            printer.embed(np.zeros((1, 2, 1), np.uint8))
        except IdentityInputError as e:
            raised.append(str(e))
    worker = threading.Thread(target=hang)
    worker.start()
    try:
        assert until(started.exists, 60), "the hanging print never began"
        t0 = time.monotonic()
        printer.stop()
        worker.join(timeout=30)
        assert not worker.is_alive() and time.monotonic() - t0 < 10
        assert raised == ["the print process was stopped"]
        assert not multiprocessing.active_children()        # none started again
        with pytest.raises(IdentityInputError, match="stopped"):
            printer.embed(np.zeros((2, 2, 3), np.uint8))
    finally:
        printer.stop()
        worker.join(timeout=30)
